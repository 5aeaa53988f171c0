#!/usr/bin/env bash
# Removes what a Cubicle server left on this Docker host (docs/operations.md#uninstall). Dry run unless --yes.
set -euo pipefail

usage () {
  cat <<'EOF'
Usage: scripts/uninstall.sh [--prefix PREFIX] [--network NAME] [--orphan-chains] [--yes]

Removes what the Cubicle server with SANDBOX_PREFIX=PREFIX left on this Docker host:
  - containers, volumes and networks labelled managed-by=computer-use-server and cu.prefix=PREFIX
    (chat sandboxes, warm-pool sandboxes, home volumes, the sandbox network), and
  - the egress firewall of those networks: the CU-EG-<hash> chains of iptables and ip6tables and
    the INPUT rules that jump to them (needs root).
Without --yes nothing is removed: it prints what it would remove (dry run).

  --prefix PREFIX   SANDBOX_PREFIX of the server (default: $SANDBOX_PREFIX, else cu)
  --network NAME    SANDBOX_NETWORK, when set to a network you created: its firewall chains are
                    removed too (the network itself only when it carries the prefix's labels)
  --orphan-chains   also remove CU-EG-* chains whose network bridge no longer exists (left when a
                    network was removed without root); they belong to no prefix in particular
  --yes             remove (default: dry run)

Kept: the server's own container (docker compose down), DATA_DIR (chat files and records),
images (docker image rm computer-use-sandbox:latest), and every object of another prefix.
Exit status: 0 done (or nothing to do), 1 something could not be removed, 2 bad usage.
EOF
}

prefix=${SANDBOX_PREFIX:-cu}
network=''
orphans=0
apply=0
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) [ $# -ge 2 ] || { echo 'uninstall: --prefix needs a value' >&2; exit 2; }; prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#--prefix=}; shift ;;
    --network) [ $# -ge 2 ] || { echo 'uninstall: --network needs a value' >&2; exit 2; }; network=$2; shift 2 ;;
    --network=*) network=${1#--network=}; shift ;;
    --orphan-chains) orphans=1; shift ;;
    --yes) apply=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "uninstall: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
# The server's own rule for SANDBOX_PREFIX: it is also what keeps a label filter from matching more.
if ! [[ $prefix =~ ^[a-z0-9][a-z0-9-]{0,19}$ ]]; then
  echo "uninstall: invalid prefix '$prefix': SANDBOX_PREFIX is 1-20 characters of a-z, 0-9 and '-', starting with a letter or digit" >&2
  exit 2
fi
if [ -n "$network" ] && ! [[ $network =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$ ]]; then
  echo "uninstall: invalid network name '$network'" >&2
  exit 2
fi
command -v docker >/dev/null 2>&1 || { echo 'uninstall: the docker command is missing' >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo 'uninstall: the Docker engine does not answer (is DOCKER_HOST right? are you allowed to use it?)' >&2; exit 2; }

failed=0
if [ $apply -eq 1 ]; then mode='removing'; else mode='would remove'; echo 'Dry run: nothing is removed (run again with --yes to remove).'; fi
say () { printf '%s %s\n' "$mode" "$*"; }
act () { # act DESCRIPTION COMMAND...: runs the command with --yes, else only says it
  local what=$1; shift
  say "$what"
  [ $apply -eq 1 ] || return 0
  "$@" >/dev/null 2>&1 || { echo "uninstall: failed: $*" >&2; failed=1; }
}

filters=(--filter label=managed-by=computer-use-server --filter "label=cu.prefix=$prefix")

# The bridge of each network, read before the networks go: the chain names derive from it
# (CU-EG- + the first 12 hex digits of sha256(bridge name), as the server names them).
bridges=()
bridge_of () {
  local b
  b=$(docker network inspect -f '{{index .Options "com.docker.network.bridge.name"}}' "$1" 2>/dev/null) || return 1
  if [ -z "$b" ] || [ "$b" = '<no value>' ]; then
    b="br-$(docker network inspect -f '{{.Id}}' "$1" | cut -c1-12)"
  fi
  printf '%s\n' "$b"
}
mapfile -t nets < <(docker network ls -q "${filters[@]}")
for id in "${nets[@]}"; do b=$(bridge_of "$id") && bridges+=("$b"); done
if [ -n "$network" ]; then
  if b=$(bridge_of "$network"); then bridges+=("$b"); else echo "uninstall: no network '$network' on this engine" >&2; failed=1; fi
fi

echo "Cubicle objects of prefix '$prefix':"
mapfile -t containers < <(docker ps -aq "${filters[@]}")
for id in "${containers[@]}"; do
  act "container $(docker inspect -f '{{.Name}}' "$id" 2>/dev/null | sed 's#^/##' || echo "$id")" docker rm -f "$id"
done
mapfile -t volumes < <(docker volume ls -q "${filters[@]}")
for name in "${volumes[@]}"; do act "volume $name" docker volume rm -f "$name"; done
for id in "${nets[@]}"; do
  act "network $(docker network inspect -f '{{.Name}}' "$id" 2>/dev/null || echo "$id")" docker network rm "$id"
done

chain_of () { printf 'CU-EG-%s' "$(printf '%s' "$1" | sha256sum | cut -c1-12)"; }
can_firewall=1
if [ "$(id -u)" -ne 0 ]; then
  can_firewall=0
elif ! command -v iptables >/dev/null 2>&1; then
  can_firewall=0
fi
drop_chain () { # drop_chain TOOL CHAIN BRIDGE(optional): the INPUT jumps to it, then the chain
  local tool=$1 chain=$2 bridge=${3:-} rule
  command -v "$tool" >/dev/null 2>&1 || return 0
  "$tool" -w 5 -S "$chain" >/dev/null 2>&1 || return 0
  while read -r rule; do
    [ -n "$rule" ] || continue
    # shellcheck disable=SC2086 # the rule's own words, as iptables -S printed them
    act "$tool rule: $rule" "$tool" -w 5 ${rule/#-A /-D }
  done < <("$tool" -w 5 -S INPUT 2>/dev/null | grep -E -- "-j $chain( |\$)" || true)
  act "$tool chain $chain${bridge:+ (bridge $bridge)}" sh -c "'$tool' -w 5 -F '$chain' && '$tool' -w 5 -X '$chain'"
}
if [ ${#bridges[@]} -gt 0 ] || [ $orphans -eq 1 ]; then
  if [ $can_firewall -eq 0 ]; then
    echo 'uninstall: not root (or no iptables): the egress firewall chains cannot be read or removed here; as root run:' >&2
    for b in "${bridges[@]}"; do
      c=$(chain_of "$b")
      echo "  iptables -D INPUT -i $b -j $c; iptables -F $c; iptables -X $c (and the same with ip6tables)" >&2
    done
    [ $orphans -eq 0 ] || echo '  and this script with --orphan-chains' >&2
    [ $apply -eq 0 ] || failed=1
  else
    for b in "${bridges[@]}"; do
      c=$(chain_of "$b")
      drop_chain iptables "$c" "$b"
      drop_chain ip6tables "$c" "$b"
    done
    if [ $orphans -eq 1 ]; then
      for tool in iptables ip6tables; do
        command -v "$tool" >/dev/null 2>&1 || continue
        while read -r c; do
          # Orphaned: INPUT jumps to it, and every one names an interface that no longer exists. A
          # chain without any jump may be one a server is installing right now: it is only reported.
          live=0 jumps=0
          while read -r ifname; do
            jumps=$((jumps + 1))
            [ -e "/sys/class/net/$ifname" ] && live=1
          done < <("$tool" -w 5 -S INPUT 2>/dev/null | grep -E -- "-j $c( |\$)" | sed -nE 's/.* -i ([^ ]+) .*/\1/p')
          if [ $jumps -eq 0 ]; then
            echo "left $tool chain $c: nothing jumps to it (remove it with $tool -X $c if no server is starting)"
          elif [ $live -eq 0 ]; then
            drop_chain "$tool" "$c"
          fi
        done < <("$tool" -w 5 -S 2>/dev/null | sed -nE 's/^-N (CU-EG-[0-9a-f]{12})$/\1/p')
      done
    fi
  fi
fi

if [ ${#containers[@]} -eq 0 ] && [ ${#volumes[@]} -eq 0 ] && [ ${#nets[@]} -eq 0 ] && [ ${#bridges[@]} -eq 0 ] && [ $orphans -eq 0 ]; then
  echo "nothing labelled cu.prefix=$prefix on this engine"
fi
echo "Kept: DATA_DIR (chat files), images, the server's container, other prefixes' objects."
exit $failed
