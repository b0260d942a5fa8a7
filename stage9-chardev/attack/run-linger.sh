#!/bin/sh
# Reproduces: a client's descriptor whose close blocks wedges its serve
# goroutine; SIGTERM then takes the whole 10 s shutdown bound and exits 1.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9linger.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 >$D/daemon.log 2>&1 &
PID=$!
sleep 1
timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups $B/linger -node $NODE -n ${N:-1} ${ATTACH:-} > $D/stranger.out 2>&1 &
SP=$!
sleep 4; sleep ${HOLD:-0}
cat $D/stranger.out
echo "--- daemon threads stuck in close (wchan):"
for t in /proc/$PID/task/*; do w=$(cat $t/wchan); case $w in futex*|do_epoll*|poll_sched*) ;; *) echo "$t $w";; esac; done
echo "--- softgpu-smi -l 0 (does a well-behaved tool still work?)"
timeout 5 $B/softgpu-smi -node $NODE 2>&1 | head -20
echo "--- SIGTERM"
T0=$(date +%s.%N)
kill -TERM $PID
wait $PID; RC=$?
T1=$(date +%s.%N)
echo "softgpud exited status $RC after $(echo "$T1 - $T0" | bc) s"
tail -5 $D/daemon.log
kill $SP 2>/dev/null
