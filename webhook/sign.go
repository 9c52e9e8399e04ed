package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Headers of every delivery, besides Content-Type.
const (
	HeaderEvent     = "X-Belay-Event"
	HeaderDelivery  = "X-Belay-Delivery"
	HeaderTimestamp = "X-Belay-Timestamp"
	HeaderSignature = "X-Belay-Signature"
)

// Sign returns the X-Belay-Signature value of body sent at timestamp (unix
// seconds, as sent in X-Belay-Timestamp). The HMAC key is the whole secret,
// "whsec_" prefix included.
func Sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports whether signature (the X-Belay-Signature header)
// is the signature of body and timestamp (the X-Belay-Timestamp header)
// with secret (the whole "whsec_…" string). It compares in constant time. It
// does not judge the timestamp's age: reject old ones yourself to stop
// replays. In a handler:
//
//	body, err := io.ReadAll(r.Body)
//	ts := r.Header.Get(webhook.HeaderTimestamp)
//	if err != nil || !webhook.VerifySignature(secret, ts, body, r.Header.Get(webhook.HeaderSignature)) {
//		http.Error(w, "bad signature", http.StatusUnauthorized)
//		return
//	}
func VerifySignature(secret, timestamp string, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, timestamp, body)), []byte(signature))
}
