package zrecord_test

import (
	"errors"
	"testing"

	"loaderx.invalid/zrecord"
	"loaderx.invalid/zrecord/internal/zrcore"
)

// The Go status constants and sentinels against the C table (zrerror.h):
// every C status has its Go constant and sentinel, with the same code,
// name and zr_strerror text, and no Go constant is outside the table.
func TestStatusTableMatchesC(t *testing.T) {
	type entry struct {
		status   zrecord.Status
		sentinel *zrecord.Error
	}
	goStatus := map[string]entry{
		"EINVAL":       {zrecord.StatusInvalid, zrecord.ErrInvalid},
		"ENOMEM":       {zrecord.StatusNoMemory, zrecord.ErrNoMemory},
		"EIO":          {zrecord.StatusIO, zrecord.ErrIO},
		"EBUSY":        {zrecord.StatusBusy, zrecord.ErrBusy},
		"EEXIST":       {zrecord.StatusExist, zrecord.ErrExist},
		"ENOTSTORE":    {zrecord.StatusNotStore, zrecord.ErrNotStore},
		"ERANGE":       {zrecord.StatusRange, zrecord.ErrRange},
		"ECORRUPT":     {zrecord.StatusCorrupt, zrecord.ErrCorrupt},
		"ETOOBIG":      {zrecord.StatusTooBig, zrecord.ErrTooBig},
		"EUNSUPPORTED": {zrecord.StatusUnsupported, zrecord.ErrUnsupported},
		"ECLOSED":      {zrecord.StatusClosed, zrecord.ErrClosed},
		"ESTATE":       {zrecord.StatusState, zrecord.ErrState},
		"EINTR":        {zrecord.StatusInterrupted, zrecord.ErrInterrupted},
	}
	last := zrcore.ZR_STATUS_LAST
	if n := 1 - last; n != zrcore.ZR_STATUS_COUNT || len(goStatus) != n-1 {
		t.Fatalf("C table has %d statuses (ZR_STATUS_COUNT %d), Go has %d error statuses",
			n, zrcore.ZR_STATUS_COUNT, len(goStatus))
	}
	for code := -1; code >= last; code-- {
		name := zrcore.Zr_status_name(code)
		en, ok := goStatus[name]
		st := en.status
		if !ok {
			t.Errorf("C status %d (%s) has no Go constant", code, name)
			continue
		}
		if int(st) != code {
			t.Errorf("Go constant for %s is %d, C says %d", name, st, code)
		}
		if st.Name() != name || st.String() != zrcore.Zr_strerror(code) {
			t.Errorf("Status(%d): Name %q String %q, C: %q %q", code, st.Name(), st.String(),
				name, zrcore.Zr_strerror(code))
		}
		e := en.sentinel
		if e == nil || int(e.Code) != code || e.Msg != zrcore.Zr_strerror(code) {
			t.Errorf("sentinel for %s is %+v, want code %d text %q", name, e, code,
				zrcore.Zr_strerror(code))
		}
		if !errors.Is(&zrecord.Error{Code: zrecord.Status(code), Msg: "x"}, e) {
			t.Errorf("errors.Is does not match %s", name)
		}
	}
	if zrecord.Status(last-1).Name() != "" {
		t.Errorf("a code past the table has a name")
	}
}
