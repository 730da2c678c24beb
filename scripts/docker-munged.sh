#!/bin/sh
# scripts/docker-munged.sh — the `munge` service of docker-compose.yml: runs MUNGE's daemon
# in the foreground, as the `munge` user, with the cluster's key (a compose secret), its
# socket in a volume the stacklens services mount at the same path (docs/deployment.md).
#
# The secret arrives as a bind mount whose owner and mode are the host file's; munged
# refuses a key it does not own or that others can read, so the key is copied first.
# Paths (defaults = what the image and docker-compose.yml use):
#   MUNGE_KEY_SECRET  the key as mounted           (/run/secrets/munge_key)
#   MUNGE_SOCKET_DIR  the socket's directory       (/run/munge; socket munge.socket.2)
#   MUNGE_STATE_DIR   key copy, pid, seed and log  (/var/lib/munge)
set -eu

key_secret=${MUNGE_KEY_SECRET:-/run/secrets/munge_key}
socket_dir=${MUNGE_SOCKET_DIR:-/run/munge}
state_dir=${MUNGE_STATE_DIR:-/var/lib/munge}

if [ ! -s "$key_secret" ]; then
    echo "munged: no MUNGE key at $key_secret: give the cluster's /etc/munge/munge.key as the" \
         "compose secret munge_key (docs/deployment.md)" >&2
    exit 1
fi
mkdir -p "$socket_dir" "$state_dir"
# The socket's directory is shared with the stacklens services: open to read and enter
# (munged itself checks that nobody else can write there).
chown munge:munge "$socket_dir" "$state_dir"
chmod 0755 "$socket_dir"
chmod 0700 "$state_dir"
cp "$key_secret" "$state_dir/munge.key"
chown munge:munge "$state_dir/munge.key"
chmod 0400 "$state_dir/munge.key"
rm -f "$socket_dir/munge.socket.2" "$socket_dir/munge.socket.2.lock"

exec setpriv --reuid=munge --regid=munge --init-groups -- munged --foreground \
    --socket="$socket_dir/munge.socket.2" --key-file="$state_dir/munge.key" \
    --pid-file="$state_dir/munged.pid" --seed-file="$state_dir/munged.seed" \
    --log-file="$state_dir/munged.log"
