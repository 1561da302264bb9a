# SPDX-License-Identifier: Apache-2.0
# scripts/lib/redlock.sh — a Redlock set for scripts: independent redis-servers on loopback, each
# on a free port with no persistence, in DIR/node1 .. DIR/nodeN, started and stopped by pid.
# Source it after lib/redis.sh; it defines functions only.

# redlock_start DIR [COUNT]
# Starts COUNT (default 5) servers; sets REDLOCK_URI (redlock://127.0.0.1:P1,...) and writes it
# to DIR/redlock.uri. On failure stops the servers it started and returns non-zero.
redlock_start() {
  local dir count="${2:-5}" i hosts=""
  # Absolute: each server's config names its files, and redis-server changes into its dir.
  dir="$(mkdir -p "$1" && cd "$1" && pwd)" || return 1
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

# redlock_stop DIR — stops every server that redlock_start started in DIR, by recorded pid; all
# at once, since each stop waits until its server has exited.
redlock_stop() {
  local dir="$1" node
  local waiting=()
  for node in "$dir"/node*; do
    [ -d "$node" ] || continue
    redis_stop "$node" &
    waiting+=("$!")
  done
  [ ${#waiting[@]} -eq 0 ] || wait "${waiting[@]}"
  rm -f "$dir/redlock.uri"
}
