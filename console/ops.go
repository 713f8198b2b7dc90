package console

import (
	"context"
	"net/http"
	"time"

	"github.com/sessionbus/sessionbus/inspect"
	"github.com/sessionbus/sessionbus/kv/runs"
	"github.com/sessionbus/sessionbus/objects/archives"
)

// The ops page: what `sessionbus inspect` reports (streams, buckets,
// consumer lag, stuck runs, pending announces and notices), from the same
// code, plus the runs in flight and the archives.

// Ops is the ops page's data.
type Ops struct {
	Report    *inspect.Report  `json:"report"`
	InFlight  []runs.Record    `json:"inFlight"`
	Archives  []*archives.Meta `json:"archives"`
	Connected bool             `json:"connected"`
	At        int64            `json:"at"`
}

func (s *Server) handleOps(w http.ResponseWriter, r *http.Request) {
	if userOf(r).Token != "" {
		writeError(w, http.StatusForbidden, "the ops page needs a credentials login (admin or ops): a token login sees sessions only")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	rep, err := inspect.Read(ctx, s.js, inspect.Options{Names: s.o.Names, StuckAfter: s.o.StuckAfter})
	if err != nil {
		writeError(w, http.StatusBadGateway, "read the deployment: "+err.Error())
		return
	}
	o := Ops{Report: rep, InFlight: s.runs.running(), Archives: []*archives.Meta{}, Connected: s.o.Conn.IsConnected(), At: time.Now().UnixMilli()}
	if o.InFlight == nil {
		o.InFlight = []runs.Record{}
	}
	// only read archives that exist: the console creates no store
	if rep.HasStream("OBJ_" + s.o.Names.ArchivesBucket()) {
		if st, err := archives.Open(ctx, s.js, s.o.Names); err == nil {
			if ms, err := st.List(ctx); err == nil {
				for _, m := range ms {
					m.Entry = nil
				}
				o.Archives = ms
			}
		}
	}
	writeJSON(w, http.StatusOK, o)
}
