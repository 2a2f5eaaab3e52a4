package serve

import (
	"testing"
	"time"
)

// TestSignInCodesExpireAndAreSpent: a code starts one session, before
// SignInTTL; past the bound of unused codes the first to expire goes.
func TestSignInCodesExpireAndAreSpent(t *testing.T) {
	st := newSignInStore()
	t0 := time.Now()
	late := st.add(roleAdmin, "a", t0)
	if _, ok := st.redeem(late, t0.Add(SignInTTL)); ok {
		t.Errorf("a code redeemed %s after it was made: accepted, want refused", SignInTTL)
	}
	code := st.add(roleAdmin, "a", t0)
	if ss, ok := st.redeem(code, t0.Add(SignInTTL-time.Second)); !ok || ss.role != roleAdmin || ss.who != "a" {
		t.Errorf("a code redeemed in time: %v %v, want the admin session it was made for", ss, ok)
	}
	if _, ok := st.redeem(code, t0.Add(time.Second)); ok {
		t.Errorf("a code redeemed twice: accepted the second time")
	}
	oldest := st.add(roleClient, "c", t0)
	for i := range maxSignIns {
		st.add(roleClient, "c", t0.Add(time.Duration(i+1)*time.Millisecond))
	}
	if len(st.codes) != maxSignIns {
		t.Errorf("%d unused codes kept, want at most %d", len(st.codes), maxSignIns)
	}
	if _, ok := st.redeem(oldest, t0.Add(time.Second)); ok {
		t.Errorf("past %d unused codes, the first to expire is still valid", maxSignIns)
	}
}
