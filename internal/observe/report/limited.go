package report

import "sync"

// Limited passes on the first few warnings of one kind (cache, remote) of
// a run and drops the rest, so a systematic problem is reported without
// flooding the build log. Its closing note names no kind: the same warner
// serves cache and remote warnings.
func Limited(warn func(string, ...any)) func(string, ...any) {
	var mu sync.Mutex
	n := 0
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		n++
		switch {
		case n <= 3:
			warn(format, args...)
		case n == 4:
			warn("further warnings like these are not shown for this run")
		}
	}
}
