# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# scripts/lib/sentinel.sh — a Redis Sentinel topology on loopback for scripts and demos:
# one master, two replicas and three sentinels (quorum 2), on free ports, without persistence,
# with failure detection and failover timeouts short enough for tests. Everything runs on
# 127.0.0.1 and is stopped by pid. Source it; it defines functions only.
#
# Layout of DIR:
#   DIR/master DIR/replica-1 DIR/replica-2     data nodes (files of scripts/lib/redis.sh)
#   DIR/sentinel-1 .. DIR/sentinel-3           the same files; the sentinel rewrites its redis.conf
#   DIR/topology.env                           SENTINEL_MASTER_NAME, *_PORT, SENTINEL_URI

source "$(dirname "${BASH_SOURCE[0]}")/redis.sh"

SENTINEL_MASTER_NAME="${SENTINEL_MASTER_NAME:-mymaster}"
# Timings (milliseconds): how long a master may be silent before a sentinel calls it down, and
# the failover timeout (also the leader-election timeout and the wait between two failovers).
SENTINEL_DOWN_AFTER_MS="${SENTINEL_DOWN_AFTER_MS:-1000}"
SENTINEL_FAILOVER_TIMEOUT_MS="${SENTINEL_FAILOVER_TIMEOUT_MS:-3000}"

# What every data node gets on top of scripts/lib/redis.sh's defaults: diskless replication
# without delay, so a replica is in sync within milliseconds of starting.
_sentinel_data_conf=("repl-diskless-sync yes" "repl-diskless-sync-delay 0" "replica-announce-ip 127.0.0.1")

# _sentinel_id — 40 hex digits: a sentinel's run id, fixed in its config so that each sentinel
# can list the others as known from the start instead of discovering them over 2-second hellos.
_sentinel_id() { od -An -N20 -tx1 /dev/urandom | tr -d ' \n'; }

# _sentinel_conf N MASTER_PORT REPLICA_PORTS(2) IDS(3) PORTS(3) — sentinel N's own config lines
# (scripts/lib/redis.sh writes the bind, port, dir and log lines).
_sentinel_conf() {
  local n="$1" master="$2" r1="$3" r2="$4"; shift 4
  local ids=("$1" "$2" "$3") ports=("$4" "$5" "$6") i
  printf 'sentinel myid %s\nsentinel announce-ip 127.0.0.1\n' "${ids[$((n - 1))]}"
  printf 'sentinel monitor %s 127.0.0.1 %s 2\n' "$SENTINEL_MASTER_NAME" "$master"
  printf 'sentinel down-after-milliseconds %s %s\n' "$SENTINEL_MASTER_NAME" "$SENTINEL_DOWN_AFTER_MS"
  printf 'sentinel failover-timeout %s %s\n' "$SENTINEL_MASTER_NAME" "$SENTINEL_FAILOVER_TIMEOUT_MS"
  printf 'sentinel parallel-syncs %s 1\n' "$SENTINEL_MASTER_NAME"
  printf 'sentinel known-replica %s 127.0.0.1 %s\n' "$SENTINEL_MASTER_NAME" "$r1"
  printf 'sentinel known-replica %s 127.0.0.1 %s\n' "$SENTINEL_MASTER_NAME" "$r2"
  for i in 0 1 2; do
    [ "$i" -eq $((n - 1)) ] && continue
    printf 'sentinel known-sentinel %s 127.0.0.1 %s %s\n' "$SENTINEL_MASTER_NAME" "${ports[$i]}" "${ids[$i]}"
  done
}

# _sentinel_ready PORT — true when the sentinel on PORT sees the master up, and both replicas
# and both other sentinels known and not down.
_sentinel_ready() {
  local info
  info=$(redis-cli -h 127.0.0.1 -p "$1" sentinel master "$SENTINEL_MASTER_NAME" 2>/dev/null | paste -sd' ') || return 1
  [[ " $info " == *" flags master "* ]] && [[ " $info " == *" num-slaves 2 "* ]] &&
    [[ " $info " == *" num-other-sentinels 2 "* ]] || return 1
  # A healthy replica's flags are exactly "slave", a healthy sentinel's exactly "sentinel".
  [ "$(redis-cli -h 127.0.0.1 -p "$1" sentinel replicas "$SENTINEL_MASTER_NAME" 2>/dev/null | grep -A1 -x flags | grep -cx slave)" -eq 2 ] &&
    [ "$(redis-cli -h 127.0.0.1 -p "$1" sentinel sentinels "$SENTINEL_MASTER_NAME" 2>/dev/null | grep -A1 -x flags | grep -cx sentinel)" -eq 2 ]
}

# sentinel_start DIR — starts the topology; sets SENTINEL_URI and writes DIR/topology.env.
# Returns non-zero (after stopping whatever it started) if it cannot start.
sentinel_start() {
  local dir="$1"
  mkdir -p "$dir"
  redis_start "$dir/master" "${_sentinel_data_conf[@]}" >/dev/null || { sentinel_stop "$dir"; return 1; }
  local master=$REDIS_PORT r n
  local replicas=()
  for r in 1 2; do
    redis_start "$dir/replica-$r" "${_sentinel_data_conf[@]}" "replicaof 127.0.0.1 $master" >/dev/null ||
      { sentinel_stop "$dir"; return 1; }
    replicas+=("$REDIS_PORT")
  done

  # Each sentinel lists the others (ports and ids), so a port taken before a sentinel could bind
  # it means starting all three again on new ports.
  local ids=("$(_sentinel_id)" "$(_sentinel_id)" "$(_sentinel_id)") ports up=0
  local conf
  for _ in 1 2 3 4 5; do
    ports=("$(redis_free_port)" "$(redis_free_port)" "$(redis_free_port)")
    if [ "${ports[0]}" = "${ports[1]}" ] || [ "${ports[0]}" = "${ports[2]}" ] || [ "${ports[1]}" = "${ports[2]}" ]; then
      continue
    fi
    up=1
    for n in 1 2 3; do
      mapfile -t conf < <(_sentinel_conf "$n" "$master" "${replicas[@]}" "${ids[@]}" "${ports[@]}")
      REDIS_START_EXECUTABLE=redis-sentinel REDIS_START_PORT="${ports[$((n - 1))]}" \
        redis_start "$dir/sentinel-$n" "${conf[@]}" >/dev/null 2>&1 || { up=0; break; }
    done
    [ "$up" -eq 1 ] && break
    for n in 1 2 3; do redis_stop "$dir/sentinel-$n"; done
  done
  if [ "$up" -ne 1 ]; then
    echo "sentinel_start: the sentinels in $dir could not start" >&2
    tail -n 5 "$dir"/sentinel-*/redis.log >&2 2>/dev/null || true
    sentinel_stop "$dir"
    return 1
  fi

  # Ready: replicas in sync and every sentinel sees the whole set (about a second).
  local ok=0 dead=0 deadline=$((SECONDS + REDIS_READY_TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    ok=1
    for r in "${replicas[@]}"; do
      redis-cli -h 127.0.0.1 -p "$r" info replication 2>/dev/null | grep -q 'master_link_status:up' || ok=0
    done
    # A replica is "online" before its first acknowledgement starts the stream of writes: only a
    # write both replicas acknowledge shows that writes reach them.
    if [ "$ok" -eq 1 ]; then
      redis-cli -h 127.0.0.1 -p "$master" set dlock-topology:ready 1 >/dev/null 2>&1 || ok=0
      [ "$(redis-cli -h 127.0.0.1 -p "$master" wait 2 100 2>/dev/null)" = "2" ] || ok=0
      redis-cli -h 127.0.0.1 -p "$master" del dlock-topology:ready >/dev/null 2>&1 || true
    fi
    for n in 0 1 2; do _sentinel_ready "${ports[$n]}" || ok=0; done
    [ "$ok" -eq 1 ] && break
    for n in 1 2 3; do
      redis_alive "$(cat "$dir/sentinel-$n/server.pid")" || dead=1
    done
    [ "$dead" -eq 1 ] && break
    sleep 0.05
  done
  if [ "$ok" -ne 1 ]; then
    echo "sentinel_start: the topology in $dir did not come up" >&2
    for n in 1 2 3; do tail -n 5 "$dir/sentinel-$n/redis.log" >&2 2>/dev/null || true; done
    sentinel_stop "$dir"
    return 1
  fi

  SENTINEL_URI="redis+sentinel://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}/$SENTINEL_MASTER_NAME"
  {
    echo "SENTINEL_MASTER_NAME=$SENTINEL_MASTER_NAME"
    echo "MASTER_PORT=$master"
    echo "REPLICA_PORTS=\"${replicas[*]}\""
    echo "SENTINEL_PORTS=\"${ports[*]}\""
    echo "SENTINEL_URI=$SENTINEL_URI"
  } > "$dir/topology.env"
}

# sentinel_stop DIR — stops every server sentinel_start started in DIR, by its recorded pid:
# sentinels first, so that no failover starts while the data nodes go down.
sentinel_stop() {
  local dir="$1" node
  for node in sentinel-1 sentinel-2 sentinel-3 master replica-1 replica-2; do redis_stop "$dir/$node"; done
}
