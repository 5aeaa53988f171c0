# The server's image. Build: docker build -t cubicle-server .
# Run it with the Docker socket and a data directory that has the same path inside and outside,
# so the sandboxes' bind mounts resolve on the host:
#   docker run -d -p 8081:8081 -v /var/run/docker.sock:/var/run/docker.sock \
#     --group-add "$(stat -c %g /var/run/docker.sock)" \
#     -v /srv/cubicle:/srv/cubicle -e DATA_DIR=/srv/cubicle -e MCP_API_KEY="$(openssl rand -hex 32)" \
#     -e PUBLIC_BASE_URL=https://cubicle.example.com cubicle-server
# The server runs as the unprivileged user `node` (uid/gid 1000, the same ids as the sandbox user,
# so outputs folders need no chown), in a `docker` group for the socket: either build with
# --build-arg DOCKER_GID=$(stat -c %g /var/run/docker.sock) or pass --group-add as above.
# The data directory must be writable by uid 1000 (chown 1000:1000 /srv/cubicle).
# Node.js 24 LTS (package.json engines: >= 22.13); scripts/build-server-image.sh passes a base made from
# the npm registry when no image registry answers.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# PEM text of extra CAs npm must trust (a TLS-intercepting proxy); build stage only, never in the result.
ARG EXTRA_CA_PEM=""
RUN set -eu; \
    if [ -n "${EXTRA_CA_PEM}" ]; then printf '%s\n' "${EXTRA_CA_PEM}" >/tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi; \
    npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json fastify.config.ts ./
# npm run build: tsc, then the vendor bundle into dist/node_modules (docs/architecture.md#the-build).
COPY scripts/build.mjs scripts/build.mjs
COPY core core
COPY plugins plugins
COPY examples examples
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE}
# gid of the docker group: the group that owns /var/run/docker.sock on the host.
ARG DOCKER_GID=999
ENV NODE_ENV=production
WORKDIR /app
# Non-root: the Docker socket needs its group, not root. Reuses a group that already has
# the gid under another name; /data is the default DATA_DIR, owned by the server user.
RUN set -eu; \
    getent group "${DOCKER_GID}" >/dev/null || groupadd --system --gid "${DOCKER_GID}" docker; \
    usermod --append --groups "$(getent group "${DOCKER_GID}" | cut -d: -f1)" node; \
    install -d -o node -g node -m 0750 /data
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
COPY plugins/preview/public plugins/preview/public
COPY plugins/preview/app-view plugins/preview/app-view
COPY plugins/icons/public plugins/icons/public
COPY sandbox-image/skills sandbox-image/skills
USER node
EXPOSE 8081
HEALTHCHECK --interval=30s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8081)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# --optimize-for-size: V8 favours memory over speed, as `npm start` does (docs/performance.md: RSS at 100 live chats 118 MiB instead of 187, server CPU +15 %).
CMD ["node", "--optimize-for-size", "dist/core/server.js"]
