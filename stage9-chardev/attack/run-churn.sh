#!/bin/sh
# Garbage in rings and doorbells racing CHANNEL_CLOSE/reopen from 4
# stranger connections, beside a victim checking every byte of its fills.
set -u; DUR=${DUR:-20s}
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9churn.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 >$D/daemon.log 2>&1 &
PID=$!
sleep 1
fds0=$(ls /proc/$PID/fd | wc -l)
setpriv --reuid=65534 --regid=65534 --clear-groups $B/churn -node $NODE -d ${DUR:-20s} -workers ${W:-4} &
SP=$!
sleep 1
$B/victim -node $NODE -fills $(( ${DUR%s} - 3 ))s; echo "victim exit $?"
wait $SP
sleep 2
kill -0 $PID || { echo DAEMON DIED; tail -40 $D/daemon.log; exit 1; }
echo "daemon fds: $fds0 before, $(ls /proc/$PID/fd | wc -l) after"
$B/softgpu-smi -node $NODE | sed -n '1,8p'
grep -E 'panic|ERROR|invariant' $D/daemon.log | head
T0=$(date +%s.%N); kill -TERM $PID; wait $PID; RC=$?; T1=$(date +%s.%N)
echo "softgpud exit $RC after $(echo "$T1 - $T0" | bc) s"
