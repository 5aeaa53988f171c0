# The server's image. Build: docker build -t cubicle-server .
# Run it with the Docker socket and a data directory that has the same path inside and outside,
# so the sandboxes' bind mounts resolve on the host:
#   docker run -d -p 8081:8081 -v /var/run/docker.sock:/var/run/docker.sock \
#     -v /srv/cubicle:/srv/cubicle -e DATA_DIR=/srv/cubicle -e MCP_API_KEY=... \
#     -e PUBLIC_BASE_URL=https://cubicle.example.com cubicle-server
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json fastify.config.ts ./
COPY core core
COPY plugins plugins
COPY examples examples
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY package.json ./
COPY plugins/preview/public plugins/preview/public
COPY sandbox-image/skills sandbox-image/skills
EXPOSE 8081
HEALTHCHECK --interval=30s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8081)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "dist/core/server.js"]
