#!/bin/sh
# A stranger holds both engines with SPINs, one fresh context per watchdog
# reset; a victim times its fills and a fresh dial.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9spin.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 >$D/daemon.log 2>&1 &
PID=$!
sleep 1
setpriv --reuid=65534 --regid=65534 --clear-groups $B/spinhog -node $NODE -d ${DUR:-20s} > $D/stranger.out 2>&1 &
SP=$!
sleep 1
$B/victim -node $NODE -fills 12s; echo "victim (dialled during the hog) exit $?"
for i in 1 2 3; do T0=$(date +%s%N); $B/victim -node $NODE -alloc 4096 >/dev/null 2>&1; RC=$?; echo "fresh victim life: exit $RC in $(( ($(date +%s%N) - T0)/1000000 )) ms"; done
wait $SP
cat $D/stranger.out
kill -TERM $PID; wait $PID; echo "softgpud exit $?"
