#!/bin/sh
# Random calls with random descriptors from two stranger processes; then
# the daemon must be alive, back to its descriptors, serve a victim, and
# stop cleanly on SIGTERM.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9fuzz.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 -v >$D/daemon.log 2>&1 &
PID=$!
sleep 1
fds0=$(ls /proc/$PID/fd | wc -l); thr0=$(ls /proc/$PID/task | wc -l)
echo "daemon: $fds0 fds, $thr0 threads before"
for s in ${SEEDS:-1 2}; do
  setpriv --reuid=65534 --regid=65534 --clear-groups $B/callfuzz -node $NODE -d ${DUR:-30s} -seed $s > $D/fuzz$s.out 2>&1 &
done
wait %2 %3 2>/dev/null; sleep 0.2
while pgrep -x callfuzz >/dev/null; do sleep 1; done
cat $D/fuzz*.out
sleep 3
if ! kill -0 $PID 2>/dev/null; then echo "DAEMON DIED"; tail -50 $D/daemon.log; exit 1; fi
echo "daemon: $(ls /proc/$PID/fd | wc -l) fds, $(ls /proc/$PID/task | wc -l) threads after; $(grep -c 'client gone' $D/daemon.log) clients gone"
$B/softgpu-smi -node $NODE | sed -n '1,2p;/^PID/,$p'
$B/victim -node $NODE; echo "victim exit $?"
grep -E 'panic|ERROR|invariant' $D/daemon.log | head
T0=$(date +%s.%N); kill -TERM $PID; wait $PID; RC=$?; T1=$(date +%s.%N)
echo "softgpud exit $RC after $(echo "$T1 - $T0" | bc) s"
echo "log: $D/daemon.log"
