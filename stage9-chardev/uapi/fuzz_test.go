package uapi

import (
	"bytes"
	"testing"
)

// FuzzDecodeCall feeds DecodeCall what a hostile client could send. It
// must never panic, and a message it accepts must be exactly the message
// EncodeCall makes of what it decoded: no byte of an accepted call is
// ignored, so none can carry a meaning the daemon did not check.
func FuzzDecodeCall(f *testing.F) {
	for i := range Calls {
		msg, _ := validCall(&Calls[i])
		f.Add(msg, Calls[i].FDsIn)
	}
	f.Add([]byte{}, 0)
	f.Add(make([]byte, MaxMessage), MaxFDs)
	f.Fuzz(func(t *testing.T, msg []byte, nfds int) {
		h, arg, err := DecodeCall(msg, nfds)
		if err != nil {
			if arg != nil {
				t.Fatalf("DecodeCall error %v with argument %+v", err, arg)
			}
			return
		}
		if again := EncodeCall(h.Seq, arg); !bytes.Equal(again, msg) {
			t.Fatalf("accepted % x\nre-encodes as % x", msg, again)
		}
	})
}
