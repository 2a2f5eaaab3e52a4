package chaos

import (
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/clocktest"
)

// TestS10ClientClock steps and stalls the clock of the holder's Locker
// (dlock.WithClock with a clocktest.Clock), while the backend and the
// next holder keep the host's clock:
//
//   - stalled (a paused VM's clock source, a broken TSC): the watchdog's
//     timers stop, no refresh is sent, and the backend expires the lease
//     under a holder that still believes — the negative control: only the
//     fence, which must still rise, protects the resource;
//   - stepped forward by a TTL: the watchdog sees the lease past its loss
//     time and tells the holder at once, before anyone else is granted
//     (the safe direction: a lease given up early, never late).
//
// A session-bound lease (Postgres advisory) does not depend on refreshes:
// the server keeps it while the session lives, so a stalled client clock
// gives no second holder there, and the stall row is judged as safe.
func TestS10ClientClock(t *testing.T) {
	for _, b := range allBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			stall := Row{Scenario: "S10b client clock stalls mid-hold, control: second holder while the first believes",
				Backend: b.Name, Expect: ExpectViolation, Metric: "stall→second grant"}
			if b.Session {
				stall.Scenario = "S10b client clock stalls mid-hold, session-bound: second holder while the first believes"
				stall.Expect = ExpectSafe
			}
			fences := Row{Scenario: "S10b client clock stalls mid-hold: second grant's fence not above", Backend: b.Name,
				Expect: ExpectSafe, Unlinearizable: -1}
			step := Row{Scenario: "S10b client clock steps forward a TTL: holder not told before the next grant",
				Backend: b.Name, Expect: ExpectSafe, Metric: "step→told"}
			clock := clocktest.New()
			a := openLocker(t, b, dlock.WithTTL(b.TTL), dlock.WithClock(clock))
			next := openLocker(t, b, dlock.WithTTL(b.TTL))
			for i := range trials(1) {
				r := holdThroughFault(t, a, next, lockName("s10b-stall", i), func() { clock.SetRate(0) }, 3*b.TTL)
				clock.SetRate(1)
				stall.Trials++
				fences.Trials++
				if r.overlap {
					stall.Violations++
				}
				if r.lin != nil {
					stall.Unlinearizable++
					t.Logf("stall trial %d: %v", i, r.lin)
				}
				if r.fenceBack {
					fences.Violations++
				}
				stall.Timings = append(stall.Timings, r.next)

				r = holdThroughFault(t, a, next, lockName("s10b-step", i), func() { clock.Step(b.TTL) }, 3*b.TTL)
				step.Trials++
				if r.overlap || r.kept || r.fenceBack {
					step.Violations++
				}
				if r.lin != nil {
					step.Unlinearizable++
					t.Logf("step trial %d: %v (told %s after the step, next grant %s after it)", i, r.lin, r.told, r.next)
				}
				step.Timings = append(step.Timings, r.told)
			}
			report(t, stall)
			report(t, fences)
			report(t, step)
		})
	}
}
