#!/bin/sh
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9punch.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 >$D/daemon.log 2>&1 &
PID=$!
sleep 1
setpriv --reuid=65534 --regid=65534 --clear-groups $B/punchring -node $NODE -d 12s &
SP=$!
sleep 1
$B/victim -node $NODE -fills 9s; echo "victim exit $?"
wait $SP
kill -0 $PID || { echo DAEMON DIED; tail -40 $D/daemon.log; exit 1; }
grep -E 'panic|ERROR|invariant' $D/daemon.log | head
T0=$(date +%s.%N); kill -TERM $PID; wait $PID; RC=$?; T1=$(date +%s.%N)
echo "softgpud exit $RC after $(echo "$T1 - $T0" | bc) s"
