#!/bin/sh
# Reproduces: a stranger holds more than its quota of device memory (or
# of the DMA window) by freeing behind its own queued DELAYs.
#   MODE=mem    (default) -client-memory/-uid-memory 4 MiB
#   MODE=window           default window quota (32 of 64 entries)
set -u
B=$(dirname "$0")/bin
MODE=${MODE:-mem}
D=$(mktemp -d /tmp/s9defer.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
if [ $MODE = mem ]; then Q="-client-memory 4194304 -uid-memory 4194304"; else Q=""; fi
$B/softgpud -node $NODE -mode 0666 -mem 16777216 $Q >$D/daemon.log 2>&1 &
PID=$!
sleep 1
echo "--- victim (root) before the stranger:"
$B/victim -node $NODE
setpriv --reuid=65534 --regid=65534 --clear-groups $B/deferhog -node $NODE -mode $MODE > $D/stranger.out 2>&1 &
SP=$!
for i in $(seq 1 60); do grep -q holding $D/stranger.out && break; sleep 0.5; done
echo "--- stranger (uid 65534):"; cat $D/stranger.out
echo "--- softgpu-smi:"
$B/softgpu-smi -node $NODE | sed -n '1,2p;/^PID/,$p'
echo "--- victim (root) with the stranger holding:"
$B/victim -node $NODE; echo "victim exit $?"
kill $SP; wait $SP 2>/dev/null
sleep 1
echo "--- victim after the stranger died:"
$B/victim -node $NODE; echo "victim exit $?"
kill -TERM $PID; wait $PID; echo "softgpud exit $?"
