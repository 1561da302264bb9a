# scripts/lib/redlock.sh — a Redlock set for scripts: independent redis-servers on loopback, each
# on a free port with no persistence, in DIR/node1 .. DIR/nodeN, started and stopped by pid.
# Source it after lib/redis.sh; it defines functions only.

# redlock_start DIR [COUNT]
# Starts COUNT (default 5) servers; sets REDLOCK_URI (redlock://127.0.0.1:P1,...) and writes it
# to DIR/redlock.uri. On failure stops the servers it started and returns non-zero.
redlock_start() {
  local dir="$1" count="${2:-5}" i hosts=""
  mkdir -p "$dir"
  for i in $(seq "$count"); do
    if ! redis_start "$dir/node$i" "enable-debug-command yes"; then
      redlock_stop "$dir"
      return 1
    fi
    hosts="${hosts:+$hosts,}127.0.0.1:$REDIS_PORT"
  done
  REDLOCK_URI="redlock://$hosts"
  echo "$REDLOCK_URI" > "$dir/redlock.uri"
}

# redlock_stop DIR — stops every server that redlock_start started in DIR, by recorded pid.
redlock_stop() {
  local dir="$1" node
  for node in "$dir"/node*; do
    [ -d "$node" ] && redis_stop "$node"
  done
  rm -f "$dir/redlock.uri"
}
