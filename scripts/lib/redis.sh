# scripts/lib/redis.sh — private redis-servers for scripts: a free loopback port, a config in
# the given directory (no persistence), started in the background and stopped by pid.
# Source it; it defines functions only.

# redis_start DIR [extra redis.conf lines...]
# Starts a server whose files live in DIR; sets REDIS_PID and REDIS_PORT and records both in
# DIR/server.pid and DIR/server.port. Returns non-zero, with the server's log, if it cannot start.
redis_start() {
  local dir="$1"; shift
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)  # redis-server changes into `dir`: relative paths would break
  local attempt port pid line
  for attempt in 1 2 3 4 5; do
    # Below Linux's ephemeral range (32768+), where outgoing connections take their ports.
    port=$(( 20000 + RANDOM % 12000 ))
    # Something answers there already: try another.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then continue; fi
    {
      printf 'bind 127.0.0.1\nport %s\nsave ""\nappendonly no\ndir %s\n' "$port" "$dir"
      printf 'daemonize no\nlogfile %s/redis.log\n' "$dir"
      for line in "$@"; do printf '%s\n' "$line"; done
    } > "$dir/redis.conf"
    redis-server "$dir/redis.conf" &
    pid=$!
    local tries
    for tries in $(seq 200); do
      if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -qE 'PONG|NOAUTH'; then
        REDIS_PID=$pid REDIS_PORT=$port
        echo "$pid" > "$dir/server.pid"
        echo "$port" > "$dir/server.port"
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  echo "redis_start: could not start redis-server in $dir" >&2
  tail -n 20 "$dir/redis.log" >&2 2>/dev/null || true
  return 1
}

# True while `pid` runs (a zombie, dead but not yet reaped, does not count).
redis_alive() {
  local state
  state=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != "Z" ]
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
