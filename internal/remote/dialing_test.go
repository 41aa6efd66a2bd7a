package remote

import (
	"context"
	"testing"
)

// TestDialingTakenOnce: a dial is taken by the first Connect with its
// options, not by one with other options, nor again once taken or
// closed; a nil Dialing takes nothing.
func TestDialingTakenOnce(t *testing.T) {
	opts := Options{Target: "grpc://" + closedPort(t), MaxAttempts: 1}
	other := opts
	other.Instance = "other"

	d := StartDial(context.Background(), opts)
	if d.claim(other) {
		t.Error("a dial taken with other options")
	}
	if !d.claim(opts) {
		t.Fatal("the dial cannot be taken with its own options")
	}
	if d.claim(opts) {
		t.Error("the dial taken twice")
	}
	if _, err := d.wait(context.Background()); err == nil {
		t.Error("a dial to a closed port succeeded")
	}
	d.Close() // taken: nothing to do

	d = StartDial(context.Background(), opts)
	d.Close()
	if d.claim(opts) {
		t.Error("a closed dial can still be taken")
	}
	var none *Dialing
	if none.claim(opts) {
		t.Error("a nil Dialing taken")
	}
	none.Close()
}
