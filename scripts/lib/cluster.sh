# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# scripts/lib/cluster.sh — a private Redis Cluster on loopback for scripts and benchmarks:
# nodes on free ports below the ephemeral range (each with its cluster bus port, port + 10000,
# free too), no persistence, a short cluster-node-timeout, every node announcing 127.0.0.1.
# Each node is a server of scripts/lib/redis.sh, started in the background and stopped by pid.
# Source it; it defines functions only.
#
# Layout of DIR: node-<i>/ (redis.conf, nodes.conf, redis.log, server.pid, server.port) per node,
# and DIR/cluster.ports (one port per line, masters first as created).

source "$(dirname "${BASH_SOURCE[0]}")/redis.sh"

# cluster_start_node NODE_DIR NODE_TIMEOUT_MS — starts one cluster-enabled redis-server whose
# files live in NODE_DIR; sets REDIS_PID and REDIS_PORT as redis_start does. The port comes from
# redis_free_port 10000, so the bus port is free and below 32768 as well; if the server cannot
# bind (taken meanwhile), another port.
cluster_start_node() {
  local dir timeout="$2"
  dir=$(mkdir -p "$1" && cd "$1" && pwd) || return 1
  for _ in 1 2 3 4 5; do
    rm -f "$dir/nodes.conf"  # a failed start may have written one
    # A replica may always take over in tests, however long its master was away, and replicas
    # sync at once rather than after the default 5 s.
    REDIS_START_PORT=$(redis_free_port 10000) redis_start "$dir" \
      "cluster-enabled yes" "cluster-config-file $dir/nodes.conf" \
      "cluster-node-timeout $timeout" "cluster-announce-ip 127.0.0.1" \
      "cluster-replica-validity-factor 0" "repl-diskless-sync-delay 0" && return 0
  done
  return 1
}

# cluster_wait_ok PORT... — waits until every node reports cluster_state:ok and knows them all.
cluster_wait_ok() {
  local count=$# port ok info deadline=$((SECONDS + REDIS_READY_TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    ok=1
    for port in "$@"; do
      info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | tr -d '\r')
      if ! grep -q '^cluster_state:ok$' <<<"$info" || ! grep -q "^cluster_known_nodes:$count\$" <<<"$info"; then
        ok=0
        break
      fi
    done
    [ "$ok" -eq 1 ] && return 0
    sleep 0.1
  done
  echo "cluster_wait_ok: the cluster did not become ready within ${REDIS_READY_TIMEOUT} s" >&2
  return 1
}

# cluster_wait_replicas PORT... — waits until every node that is a replica reports its link to
# its master up (ROLE: slave … connected).
cluster_wait_replicas() {
  local port role deadline=$((SECONDS + REDIS_READY_TIMEOUT))
  for port in "$@"; do
    while [ "$SECONDS" -lt "$deadline" ]; do
      role=$(redis-cli -h 127.0.0.1 -p "$port" role 2>/dev/null | tr -d '\r' | tr '\n' ' ')
      case "$role" in
        slave*connected*|master*) break ;;
      esac
      sleep 0.1
    done
    case "$role" in
      slave*connected*|master*) ;;
      *) echo "cluster_wait_replicas: 127.0.0.1:$port did not sync: $role" >&2; return 1 ;;
    esac
  done
}

# cluster_start DIR [MASTERS [REPLICAS_PER_MASTER [NODE_TIMEOUT_MS]]] — defaults 3 1 1000.
# Three or more masters go through `redis-cli --cluster create --cluster-replicas R`; fewer
# (redis-cli refuses them) are assigned by hand: CLUSTER MEET, ADDSLOTSRANGE, REPLICATE.
# Sets CLUSTER_PORTS (masters first) and prints nothing; returns non-zero on failure, leaving
# whatever started recorded in DIR for cluster_stop.
cluster_start() {
  local dir="$1" masters="${2:-3}" replicas="${3:-1}" timeout="${4:-1000}"
  local total=$(( masters * (1 + replicas) )) i port
  mkdir -p "$dir"
  CLUSTER_PORTS=()
  : > "$dir/cluster.ports"
  for i in $(seq 0 $(( total - 1 ))); do
    # In this shell, not a subshell: redis_stop can then reap what it stops.
    cluster_start_node "$dir/node-$i" "$timeout" || return 1
    CLUSTER_PORTS+=("$REDIS_PORT")
    echo "$REDIS_PORT" >> "$dir/cluster.ports"
  done
  if [ "$masters" -ge 3 ]; then
    local addresses=()
    for port in "${CLUSTER_PORTS[@]}"; do addresses+=("127.0.0.1:$port"); done
    redis-cli --cluster create "${addresses[@]}" --cluster-replicas "$replicas" --cluster-yes \
      > "$dir/create.log" 2>&1 || { cat "$dir/create.log" >&2; return 1; }
  else
    local first="${CLUSTER_PORTS[0]}" per=$(( 16384 / masters )) m start end id
    for port in "${CLUSTER_PORTS[@]:1}"; do
      redis-cli -h 127.0.0.1 -p "$first" cluster meet 127.0.0.1 "$port" > /dev/null
    done
    for m in $(seq 0 $(( masters - 1 ))); do
      start=$(( m * per )); end=$(( m == masters - 1 ? 16383 : (m + 1) * per - 1 ))
      redis-cli -h 127.0.0.1 -p "${CLUSTER_PORTS[$m]}" cluster addslotsrange "$start" "$end" > /dev/null
    done
    cluster_wait_ok "${CLUSTER_PORTS[@]}" || return 1
    local reply
    for i in $(seq "$masters" $(( total - 1 ))); do
      m=$(( (i - masters) % masters ))
      id=$(redis-cli -h 127.0.0.1 -p "${CLUSTER_PORTS[$m]}" cluster myid | tr -d '\r')
      reply=$(redis-cli -h 127.0.0.1 -p "${CLUSTER_PORTS[$i]}" cluster replicate "$id" 2>&1 | tr -d '\r')
      [ "$reply" = "OK" ] || { echo "cluster_start: CLUSTER REPLICATE on ${CLUSTER_PORTS[$i]}: $reply" >&2; return 1; }
    done
  fi
  cluster_wait_ok "${CLUSTER_PORTS[@]}" && cluster_wait_replicas "${CLUSTER_PORTS[@]}"
}

# cluster_uri DIR — redis+cluster://127.0.0.1:p1,127.0.0.1:p2,... from DIR/cluster.ports.
cluster_uri() {
  local dir="$1" uri="" port
  while read -r port; do
    uri="${uri:+$uri,}127.0.0.1:$port"
  done < "$dir/cluster.ports"
  echo "redis+cluster://$uri"
}

# cluster_stop DIR — stops every node started in DIR, by its recorded pid.
cluster_stop() {
  local node
  for node in "$1"/node-*; do
    [ -d "$node" ] && redis_stop "$node"
  done
  return 0
}
