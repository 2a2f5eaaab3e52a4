package clocktest

import (
	"testing"
	"time"
)

func fired(tm interface{ C() <-chan time.Time }, within time.Duration) bool {
	select {
	case <-tm.C():
		return true
	case <-time.After(within):
		return false
	}
}

func TestStalledClockHoldsTimers(t *testing.T) {
	c := New()
	c.SetRate(0)
	before := c.Now()
	tm := c.NewTimer(20 * time.Millisecond)
	if fired(tm, 100*time.Millisecond) {
		t.Fatal("a stalled clock's timer fired")
	}
	if got := c.Now().Sub(before); got != 0 {
		t.Errorf("a stalled clock moved %s", got)
	}
	c.SetRate(1)
	if !fired(tm, time.Second) {
		t.Fatal("timer did not fire once the clock ran again")
	}
}

func TestStepFiresDueTimers(t *testing.T) {
	c := New()
	tm := c.NewTimer(time.Hour)
	before := c.Now()
	c.Step(time.Hour)
	if !fired(tm, time.Second) {
		t.Fatal("a step past the timer's target did not fire it")
	}
	if got := c.Now().Sub(before); got < time.Hour {
		t.Errorf("clock moved %s after a step of 1h", got)
	}
	c.Step(-2 * time.Hour)
	if got := c.Now().Sub(before); got > -time.Hour+time.Second {
		t.Errorf("clock at %s after stepping back 2h, want about -1h", got)
	}
}

func TestFastClockFiresEarly(t *testing.T) {
	c := New()
	c.SetRate(10)
	start := time.Now()
	tm := c.NewTimer(time.Second)
	if !fired(tm, 2*time.Second) {
		t.Fatal("timer did not fire")
	}
	if took := time.Since(start); took >= time.Second {
		t.Errorf("1s at rate 10 took %s of host time, as long as at rate 1", took)
	}
}

func TestStopAndReset(t *testing.T) {
	c := New()
	tm := c.NewTimer(time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if tm.Stop() {
		t.Error("Stop of a fired timer reported it active")
	}
	if fired(tm, 20*time.Millisecond) {
		t.Error("a stopped timer delivered a stale value")
	}
	if tm.Reset(time.Hour) {
		t.Error("Reset of a stopped timer reported it active")
	}
	if !tm.Reset(time.Millisecond) {
		t.Error("Reset of an armed timer reported it inactive")
	}
	if !fired(tm, time.Second) {
		t.Error("reset timer did not fire")
	}
}
