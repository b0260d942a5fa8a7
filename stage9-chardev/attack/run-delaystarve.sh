#!/bin/sh
# Reproduces: a stranger that allocates nothing, only keeps DELAYs queued
# on its own channels, makes every other client's FREEs wait for them:
# a victim that allocates and frees a buffer in a loop, within its quota,
# runs the device out of memory.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9starve.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 ${QUOTA:-} >$D/daemon.log 2>&1 &
PID=$!
sleep 1
echo "--- victim (root) alone:"
$B/victim -node $NODE -loop 50; echo "victim exit $?"
setpriv --reuid=65534 --regid=65534 --clear-groups $B/deferhog -node $NODE -mode delay > $D/stranger.out 2>&1 &
SP=$!
for i in $(seq 1 60); do grep -q holding $D/stranger.out && break; sleep 0.2; done
echo "--- stranger (uid 65534) has queued its DELAYs and allocated nothing:"
$B/softgpu-smi -node $NODE | sed -n '/^PID/,$p'
echo "--- victim (root) beside it:"
$B/victim -node $NODE -loop 50; echo "victim exit $?"
$B/softgpu-smi -node $NODE | sed -n '2p'
echo "--- a new well-behaved client (root) dials, the stranger still holding:"
$B/victim -node $NODE -alloc 4096; echo "victim exit $?"
kill $SP; wait $SP 2>/dev/null; sleep 1
echo "--- victim after the stranger died:"
$B/victim -node $NODE -loop 50; echo "victim exit $?"
kill -TERM $PID; wait $PID; echo "softgpud exit $?"
