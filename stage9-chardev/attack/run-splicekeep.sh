#!/bin/sh
# A stranger keeps closed channels' pages in pipes (splice) instead of
# keeping their memfds: the Channels quota is refunded, the memory is not.
set -u
B=$(dirname "$0")/bin
D=$(mktemp -d /tmp/s9splice.XXXX); chmod 755 $D; mkdir $D/node
NODE=$D/node/card0
$B/softgpud -node $NODE -mode 0666 -mem 16777216 ${Q:--uid-channels 8 -client-channels 8} >$D/daemon.log 2>&1 &
PID=$!
sleep 1
grep -o 'Channels:[0-9]*' $D/daemon.log | head -2 | tr '\n' ' '; echo
A0=$(awk '/MemAvailable/{print $2}' /proc/meminfo)
setpriv --reuid=65534 --regid=65534 --clear-groups $B/splicekeep -node $NODE -n ${N:-20000} ${ARGS:-} > $D/stranger.out 2>&1 &
SP=$!
for i in $(seq 1 240); do grep -q holding $D/stranger.out && break; sleep 0.5; done
cat $D/stranger.out
A1=$(awk '/MemAvailable/{print $2}' /proc/meminfo)
echo "MemAvailable: $A0 kB before, $A1 kB with the stranger holding ($(( (A0 - A1)/1024 )) MiB less)"
$B/softgpu-smi -node $NODE | sed -n '/^QUOTA/,$p'
kill $SP; wait $SP 2>/dev/null; sleep 1
A2=$(awk '/MemAvailable/{print $2}' /proc/meminfo)
echo "MemAvailable after the stranger died: $A2 kB"
kill -TERM $PID; wait $PID; echo "softgpud exit $?"
