# SPDX-License-Identifier: Apache-2.0
# scripts/lib/redis.sh — private redis-servers (and sentinels) for scripts: a free loopback port,
# a config in the given directory (no persistence), started in the background and stopped by
# pid. The other topology libraries (sentinel.sh, cluster.sh, redlock.sh) build on these.
# Source it; it defines functions only.

# redis_free_port [OFFSET] — prints a loopback port with nothing listening on it (nor on
# port+OFFSET, for a cluster bus), below Linux's ephemeral range (32768+), where outgoing
# connections take their ports.
redis_free_port() {
  local offset="${1:-0}" port
  while true; do
    port=$(( 20000 + RANDOM % (12000 - offset) ))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
    if [ "$offset" -gt 0 ]; then (exec 3<>"/dev/tcp/127.0.0.1/$((port + offset))") 2>/dev/null && continue; fi
    echo "$port"
    return 0
  done
}

# True while `pid` runs (a zombie, dead but not yet reaped, does not count).
redis_alive() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ]
}

# How long (seconds) a script waits for a server, or a whole topology, to be ready: it takes well
# under a second when the machine is idle, seconds when it is busy; only a set that never comes up
# reaches this. REDIS_READY_TIMEOUT=N changes it.
REDIS_READY_TIMEOUT="${REDIS_READY_TIMEOUT:-60}"

# redis_wait_ping PID PORT — waits (REDIS_READY_TIMEOUT at most) until the server on PORT
# answers; fails at once when PID has exited.
redis_wait_ping() {
  local pid="$1" port="$2" deadline=$((SECONDS + REDIS_READY_TIMEOUT))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -qE 'PONG|NOAUTH'; then return 0; fi
    redis_alive "$pid" || return 1
    sleep 0.05
  done
  echo "redis_wait_ping: 127.0.0.1:$port did not answer within ${REDIS_READY_TIMEOUT} s" >&2
  return 1
}

# redis_start DIR [extra config lines...]
# Starts a server whose files live in DIR; sets REDIS_PID and REDIS_PORT and records both in
# DIR/server.pid and DIR/server.port. Returns non-zero, with the server's log, if it cannot start.
# REDIS_START_PORT=N uses that port (no retries on another); REDIS_START_EXECUTABLE=redis-sentinel
# starts a sentinel with the same config and bookkeeping.
redis_start() {
  local dir="$1"; shift
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)  # redis-server changes into `dir`: relative paths would break
  local executable="${REDIS_START_EXECUTABLE:-redis-server}" attempt port pid line
  for attempt in 1 2 3 4 5; do
    port="${REDIS_START_PORT:-$(redis_free_port)}"
    {
      printf 'bind 127.0.0.1\nport %s\ndir %s\n' "$port" "$dir"
      [ "$executable" = redis-server ] && printf 'save ""\nappendonly no\n'
      printf 'daemonize no\nlogfile %s/redis.log\n' "$dir"
      for line in "$@"; do printf '%s\n' "$line"; done
    } > "$dir/redis.conf"
    # Detached from our stdio: a caller reading our output must not wait for the server to exit.
    "$executable" "$dir/redis.conf" > "$dir/stdout.log" 2>&1 < /dev/null &
    pid=$!
    if redis_wait_ping "$pid" "$port"; then
      REDIS_PID=$pid REDIS_PORT=$port
      echo "$pid" > "$dir/server.pid"
      echo "$port" > "$dir/server.port"
      return 0
    fi
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ -n "${REDIS_START_PORT:-}" ] && break
  done
  echo "redis_start: could not start $executable in $dir" >&2
  tail -n 20 "$dir/redis.log" >&2 2>/dev/null || true
  return 1
}

# redis_stop DIR — stops the server started in DIR, by its recorded pid.
redis_stop() {
  local dir="$1" pid
  [ -f "$dir/server.pid" ] || return 0
  pid=$(cat "$dir/server.pid")
  if redis_alive "$pid"; then
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do redis_alive "$pid" || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true  # reap it when this shell started it
  rm -f "$dir/server.pid"
}
