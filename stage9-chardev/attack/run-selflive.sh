#!/bin/sh
# Reproduces: a client that passes its own connection's socket as
# MANAGED_PAGER's liveness socket is never torn down after it exits.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9self.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 ${QUOTA:-} >$D/daemon.log 2>&1 &
PID=$!
sleep 1
setpriv --reuid=65534 --regid=65534 --clear-groups $B/selflive -node $NODE -n ${N:-1} ${ARGS:-}
echo "stranger exit $?; is it still alive? $(pgrep -x selflive || echo no)"
sleep ${WAIT:-3}
echo "--- softgpu-smi ${WAIT:-3} s after the stranger exited:"
$B/softgpu-smi -node $NODE | sed -n '1,2p;/^PID/,$p'
echo "--- daemon log:"; grep -E 'attached|gone|dropped' $D/daemon.log
echo "--- victim (root):"
$B/victim -node $NODE; echo "victim exit $?"
T0=$(date +%s.%N); kill -TERM $PID; wait $PID; RC=$?; T1=$(date +%s.%N)
echo "softgpud exit $RC after $(echo "$T1 - $T0" | bc) s"
grep -E 'gone|ERROR' $D/daemon.log | tail -3
