package webhook_test

import (
	"testing"

	"github.com/belayhq/belay/webhook"
)

func TestSignIsHMACSHA256OfTimestampDotBody(t *testing.T) {
	// Computed apart: printf '1700000000.{"seq":1}' | openssl dgst -sha256 -hmac whsec_test
	const want = "sha256=926c3c48823e4dc937cdb0992313bcbbc472579d779ab54f0d4e09e4049838aa"
	if got := webhook.Sign("whsec_test", "1700000000", []byte(`{"seq":1}`)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerifySignature(t *testing.T) {
	secret, ts, body := "whsec_test", "1700000000", []byte(`{"seq":1}`)
	sig := webhook.Sign(secret, ts, body)
	for _, tc := range []struct {
		name                  string
		secret, ts, body, sig string
		want                  bool
	}{
		{"as signed", secret, ts, string(body), sig, true},
		{"another secret", "whsec_other", ts, string(body), sig, false},
		{"the secret without its prefix", "test", ts, string(body), sig, false},
		{"another timestamp", secret, "1700000001", string(body), sig, false},
		{"a changed body", secret, ts, `{"seq":2}`, sig, false},
		{"no signature", secret, ts, string(body), "", false},
		{"the hex without sha256=", secret, ts, string(body), sig[len("sha256="):], false},
		{"upper-case hex", secret, ts, string(body), "sha256=926C3C48823E4DC937CDB0992313BCBBC472579D779AB54F0D4E09E4049838AA", false},
	} {
		if got := webhook.VerifySignature(tc.secret, tc.ts, []byte(tc.body), tc.sig); got != tc.want {
			t.Errorf("%s: VerifySignature = %v, want %v", tc.name, got, tc.want)
		}
	}
}
