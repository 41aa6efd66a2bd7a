package executor

import "github.com/thindist/thindist/internal/local/proc"

// Provenance is who produced a result and how, as REAPI's
// ExecutedActionMetadata says it of a worker's: each field is set by the
// one executor that knows it and passed up unchanged by the others, so
// that a reader (the record, the report, the trace) learns how an action
// ran without knowing the chain.
type Provenance struct {
	// Where is the executor whose result it is: set by Local (Local),
	// the remote executor (Remote) and a cache (its Options.Where).
	Where Where
	// By is the kind of runner that ran the compiler of a Local result,
	// and NotWorker why it did not run on a worker when one was asked:
	// proc.Result's, copied by Local alone; ByNone for any other result.
	By        proc.RunBy
	NotWorker string
	// Replayed, for a cache hit, names the compile whose Stderr it
	// replays ("run 20261127-163224.406-6697"): the paths it prints are
	// that run's. Set by the cache executor.
	Replayed string
	// Race is how a Race ran the action (Where says whose result won);
	// Hedge how a Hedge did (a second remote execution at the same time).
	// Each set by that decorator alone, so a hedged action raced against
	// a local compile has both.
	Race, Hedge Outcome
}

// Outcome says whether a Race or a Hedge ran an action a second time at
// once and, if so, which execution's result is used.
type Outcome uint8

const (
	// Once: one execution ran (the zero value).
	Once Outcome = iota
	// FirstWon: a second execution ran; the first's (the primary's)
	// result is used.
	FirstWon
	// SecondWon: a second execution ran and its result is used.
	SecondWon
)

// Twice reports whether a second execution ran.
func (o Outcome) Twice() bool { return o != Once }

func (o Outcome) String() string {
	switch o {
	case FirstWon:
		return "first won"
	case SecondWon:
		return "second won"
	}
	return "once"
}

// outcome is the Outcome of a race that ran a second execution or not
// (twice), won by it or not (second).
func outcome(twice, second bool) Outcome {
	switch {
	case !twice:
		return Once
	case second:
		return SecondWon
	}
	return FirstWon
}
