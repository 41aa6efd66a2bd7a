package describe

import "testing"

type link struct {
	name  string
	notes []string
	wraps []any
}

func (l link) Describe() Node { return Node{Name: l.name, Notes: l.notes, Wraps: l.wraps} }

type plain struct{}

func TestTreeAndLine(t *testing.T) {
	chain := link{name: "Fallback", wraps: []any{
		link{name: "Verified", wraps: []any{link{name: "Remote", notes: []string{"second worker"}}}},
		link{name: "Verified", wraps: []any{link{name: "Local", notes: []string{"granted slot", "nice 10"}}, plain{}}},
	}}
	wantTree := `Fallback
  Verified
    Remote[second worker]
  Verified
    Local[granted slot; nice 10]
    describe.plain
`
	if got := Tree(chain); got != wantTree {
		t.Errorf("Tree:\n%s\nwant\n%s", got, wantTree)
	}
	wantLine := "Fallback(Verified(Remote[second worker]), Verified(Local[granted slot; nice 10], describe.plain))"
	if got := Line(chain); got != wantLine {
		t.Errorf("Line: %s\nwant %s", got, wantLine)
	}
}
