package redact

import (
	"reflect"
	"strings"
	"testing"
)

const secret = "s3cr3t-TOKEN"

func TestArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"thindist", "--remote-header=x-buildbuddy-api-key=" + secret, "job.json"},
			[]string{"thindist", "--remote-header=x-buildbuddy-api-key=" + Mask, "job.json"}},
		{[]string{"thindist", "--remote-header", "authorization=Bearer " + secret},
			[]string{"thindist", "--remote-header", "authorization=" + Mask}},
		{[]string{"thindist", "-remote_header", "k=" + secret},
			[]string{"thindist", "-remote_header", "k=" + Mask}},
		{[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header=k=" + secret},
			[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header=k=" + Mask}},
		{[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header", "--thinlto-distributor-arg=k=" + secret},
			[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header", "--thinlto-distributor-arg=k=" + Mask}},
		{[]string{"clang", "-Xthinlto-distributor=--remote_header=k=" + secret},
			[]string{"clang", "-Xthinlto-distributor=--remote_header=k=" + Mask}},
		{[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header=authorization=Bearer " + secret},
			[]string{"ld.lld", "--thinlto-distributor-arg=--remote-header=authorization=" + Mask}},
		{[]string{"ld.lld", "--thindist-remote-header=k=" + secret},
			[]string{"ld.lld", "--thindist-remote-header=k=" + Mask}},
		{[]string{"thindist", "--remote=grpcs://me:" + secret + "@cache.example.com:443"},
			[]string{"thindist", "--remote=grpcs://me:" + Mask + "@cache.example.com:443"}},
		// Not credentials: left alone.
		{[]string{"clang", "-O2", "--remote-instance=main", "-o", "a@b.o", "x=y"},
			[]string{"clang", "-O2", "--remote-instance=main", "-o", "a@b.o", "x=y"}},
	} {
		got := Args(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Args(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		if again := Args(got); !reflect.DeepEqual(again, got) {
			t.Errorf("Args is not idempotent on %q: %q", got, again)
		}
	}
}

func TestArgsDoesNotChangeItsInput(t *testing.T) {
	in := []string{"--remote-header=k=" + secret}
	Args(in)
	if in[0] != "--remote-header=k="+secret {
		t.Errorf("Args changed its input: %q", in)
	}
}

func TestText(t *testing.T) {
	in := "thindist: lld ran: ld.lld --thinlto-distributor-arg=--remote-header=x-api-key=" + secret +
		" -o app\nconnecting to grpcs://u:" + secret + "@host: refused\n" +
		"ld.lld --thinlto-distributor-arg=--remote-header=authorization=Bearer " + secret + " -o app"
	got := Text(in)
	if strings.Contains(got, secret) {
		t.Errorf("Text left the secret in:\n%s", got)
	}
	if !strings.Contains(got, "x-api-key="+Mask) || !strings.Contains(got, "grpcs://u:"+Mask+"@host") {
		t.Errorf("Text did not keep the keys and mask the values:\n%s", got)
	}
}

func TestValues(t *testing.T) {
	v := NewValues(secret, "on", "")
	msg := `call failed: metadata "k: ` + secret + `" rejected; flag on`
	got := v.String(msg)
	if strings.Contains(got, secret) {
		t.Errorf("Values left the secret in: %s", got)
	}
	if !strings.Contains(got, "flag on") {
		t.Errorf("Values replaced a short value everywhere: %s", got)
	}
	args := v.Args([]string{"x", "--header-file-said:" + secret})
	if strings.Contains(strings.Join(args, " "), secret) {
		t.Errorf("Values.Args left the secret in: %q", args)
	}
	var zero Values
	if zero.String("a") != "a" || !reflect.DeepEqual(zero.Args([]string{"a"}), []string{"a"}) {
		t.Errorf("the zero Values changed text")
	}
}

func TestIsCredentialFlag(t *testing.T) {
	for name, want := range map[string]bool{"remote-header": true, "remote_header": true, "remote": false, "remote-instance": false} {
		if IsCredentialFlag(name) != want {
			t.Errorf("IsCredentialFlag(%q) = %v", name, !want)
		}
	}
}
