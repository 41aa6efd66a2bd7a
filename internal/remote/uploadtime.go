package remote

import (
	"time"

	"github.com/thindist/thindist/internal/action"
)

// UploadTime is how long a's upload would still take
// (dispatch.Options.UploadTime): the bytes of its input files that
// the run does not know to be in the CAS yet, over the upload throughput
// (measured on this link, else recalled from an earlier one). 0 when the
// throughput is not known, or Ahead did not prepare a (its inputs are not
// known without building its remote action).
func (e *Executor) UploadTime(a *action.Action) time.Duration {
	v, ok := e.prepared.Load(a)
	if !ok {
		return 0
	}
	bw := e.c.link.upRate()
	if bw <= 0 {
		return 0
	}
	var n int64
	for d := range v.(*preparation).ex.Files {
		if !e.c.CAS.Present(d) {
			n += d.Size
		}
	}
	return time.Duration(float64(n) / bw * float64(time.Second))
}
