# shellcheck shell=bash
# scripts/lib/sentinel.sh — a Redis Sentinel topology on loopback for scripts and demos:
# one master, two replicas and three sentinels (quorum 2), on free ports, without persistence,
# with failure detection and failover timeouts short enough for tests. Everything runs on
# 127.0.0.1 and is stopped by pid. Source it; it defines functions only.
#
# Layout of DIR:
#   DIR/master DIR/replica-1 DIR/replica-2     data nodes (files of scripts/lib/redis.sh)
#   DIR/sentinel-1 .. DIR/sentinel-3           sentinel.conf (rewritten by the sentinel),
#                                              sentinel.log, server.pid, server.port
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

# _sentinel_alive PID — true while PID runs. A zombie counts as gone: a process that is nobody's
# child any more is not always reaped where the init process does not reap.
_sentinel_alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ]
}

# _sentinel_kill PID — SIGTERM, then SIGKILL if it has not exited within 5 s.
_sentinel_kill() {
  local pid="$1"
  _sentinel_alive "$pid" || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do _sentinel_alive "$pid" || return 0; sleep 0.05; done
  kill -9 "$pid" 2>/dev/null || true
}

# _sentinel_free_port — prints a port on 127.0.0.1 where nothing answers now, below Linux's
# usual range of ephemeral ports (32768 and up), where outgoing connections take theirs.
_sentinel_free_port() {
  local port
  while true; do
    port=$(( 20000 + RANDOM % 12768 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return 0; }
  done
}

# _sentinel_answers PID PORT — waits (up to 10 s) until the server PID answers PING on PORT;
# false if it exits first (e.g. its port was taken meanwhile).
_sentinel_answers() {
  local pid="$1" port="$2"
  for _ in $(seq 200); do
    redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -qE 'PONG|NOAUTH' && return 0
    _sentinel_alive "$pid" || return 1
    sleep 0.05
  done
  return 1
}

# _sentinel_id — 40 hex digits: a sentinel's run id, fixed in its config so that each sentinel
# can list the others as known from the start instead of discovering them over 2-second hellos.
_sentinel_id() { od -An -N20 -tx1 /dev/urandom | tr -d ' \n'; }

# _sentinel_launch DIR N PORT MASTER_PORT REPLICA_PORTS(2) IDS(3) PORTS(3)
_sentinel_launch() {
  local dir="$1" n="$2" port="$3" master="$4" r1="$5" r2="$6"; shift 6
  local ids=("$1" "$2" "$3") ports=("$4" "$5" "$6")
  local sdir="$dir/sentinel-$n" i
  mkdir -p "$sdir"
  {
    printf 'bind 127.0.0.1\nport %s\ndaemonize no\ndir %s\nlogfile %s/sentinel.log\n' "$port" "$sdir" "$sdir"
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
  } > "$sdir/sentinel.conf"
  redis-sentinel "$sdir/sentinel.conf" &
  echo "$!" > "$sdir/server.pid"
  echo "$port" > "$sdir/server.port"
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
  for _ in 1 2 3 4 5; do
    ports=("$(_sentinel_free_port)" "$(_sentinel_free_port)" "$(_sentinel_free_port)")
    if [ "${ports[0]}" = "${ports[1]}" ] || [ "${ports[0]}" = "${ports[2]}" ] || [ "${ports[1]}" = "${ports[2]}" ]; then
      continue
    fi
    for n in 1 2 3; do
      _sentinel_launch "$dir" "$n" "${ports[$((n - 1))]}" "$master" "${replicas[@]}" "${ids[@]}" "${ports[@]}"
    done
    up=1
    for n in 1 2 3; do
      _sentinel_answers "$(cat "$dir/sentinel-$n/server.pid")" "${ports[$((n - 1))]}" || up=0
    done
    [ "$up" -eq 1 ] && break
    for n in 1 2 3; do _sentinel_kill "$(cat "$dir/sentinel-$n/server.pid")"; done
  done
  if [ "$up" -ne 1 ]; then
    echo "sentinel_start: the sentinels in $dir could not start" >&2
    tail -n 5 "$dir"/sentinel-*/sentinel.log >&2 2>/dev/null || true
    sentinel_stop "$dir"
    return 1
  fi

  # Ready: replicas in sync and every sentinel sees the whole set (about a second).
  local tries ok
  for tries in $(seq 200); do
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
      _sentinel_alive "$(cat "$dir/sentinel-$n/server.pid")" || { tries=200; break; }
    done
    [ "$tries" -eq 200 ] && break
    sleep 0.05
  done
  if [ "$ok" -ne 1 ]; then
    echo "sentinel_start: the topology in $dir did not come up" >&2
    for n in 1 2 3; do tail -n 5 "$dir/sentinel-$n/sentinel.log" >&2 2>/dev/null || true; done
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
  for node in sentinel-1 sentinel-2 sentinel-3 master replica-1 replica-2; do
    [ -f "$dir/$node/server.pid" ] || continue
    _sentinel_kill "$(cat "$dir/$node/server.pid")"
    rm -f "$dir/$node/server.pid"
  done
}
