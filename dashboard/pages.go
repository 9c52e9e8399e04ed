package dashboard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/belayhq/belay"
)

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

var funcs = template.FuncMap{
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		d := time.Since(t).Round(time.Second)
		switch {
		case d < time.Minute:
			return "just now"
		case d < time.Hour:
			return fmt.Sprintf("%d min ago", int(d.Minutes()))
		case d < 48*time.Hour:
			return fmt.Sprintf("%d h ago", int(d.Hours()))
		}
		return t.Format("2006-01-02")
	},
	"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"cost": func(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) },
	"short": func(id string) string {
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
	"linkable": func(v string) string {
		if strings.HasPrefix(v, "https://") || strings.HasPrefix(v, "http://") {
			return "url"
		}
		return ""
	},
	"cardOf": func(csrf string, c card) cardView { return cardView{CSRF: csrf, Card: c} },
}

// cardView is a card with the CSRF token its form sends.
type cardView struct {
	CSRF string
	Card card
}

// card is one pending decision in the inbox.
type card struct {
	CP      *belay.Checkpoint
	Session belay.PendingSession
	Context []kv
	// Deadline is the request's next deadline (RFC 3339), if any; Action
	// what it does, Expires whether it is the checkpoint's expiry.
	Deadline string
	Action   belay.Action
	Expires  bool
	// DefaultOption is the option marked the default: the one the deadline
	// picks, or, with no deadline, the request's own default.
	DefaultOption string
	Notice        string
}

type kv struct{ Key, Value string }

// contextPairs flattens a request's context object into sorted key/values;
// anything that is not an object is shown whole.
func contextPairs(raw json.RawMessage) []kv {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []kv{{Key: "context", Value: string(raw)}}
	}
	out := make([]kv, 0, len(m))
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		out = append(out, kv{k, s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (d *Dashboard) cards(rq *request) ([]card, error) {
	pending, err := d.svc.PendingHITL(rq.ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]card, 0, len(pending))
	for _, p := range pending {
		c := card{CP: p.Checkpoint, Session: p.Session}
		if h := p.Checkpoint.HITL; h != nil {
			c.Context = contextPairs(h.Context)
			for _, o := range h.Options {
				if o.IsDefault {
					c.DefaultOption = o.ID
				}
			}
		}
		if dl := p.Deadline; dl != nil {
			c.Deadline = dl.At.UTC().Format("2006-01-02T15:04:05.000Z07:00") // to the millisecond: the countdown ends at the deadline, not before
			c.Action, c.Expires = dl.Action, dl.Reason == belay.DeadlineExpired
			if dl.Option != "" {
				c.DefaultOption = dl.Option // a pause picks none
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (d *Dashboard) inboxPage(w http.ResponseWriter, r *http.Request, rq *request) {
	cards, err := d.cards(rq)
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	d.page(w, rq, "inbox.html", "Inbox", "inbox", cards)
}

func (d *Dashboard) inboxFragment(w http.ResponseWriter, r *http.Request, rq *request) {
	cards, err := d.cards(rq)
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	d.render(w, http.StatusOK, "cards", page{CSRF: rq.sess.CSRF, Data: cards})
}

// decide records the person's choice. For htmx the answer replaces the
// card: nothing when decided, a notice when someone else was first.
func (d *Dashboard) decide(w http.ResponseWriter, r *http.Request, rq *request) {
	id := r.PathValue("id")
	in := belay.DecideInput{CheckpointID: id, SelectedOption: r.PostFormValue("option"),
		Feedback: strings.TrimSpace(r.PostFormValue("feedback"))}
	// A double click (or a retried POST) of the same choice in the same
	// sign-in returns the first decision instead of a conflict.
	sum := sha256.Sum256([]byte(rq.sess.CSRF + "\x00" + id + "\x00" + in.SelectedOption))
	in.IdempotencyKey = "dashboard-" + hex.EncodeToString(sum[:16])
	if m := strings.TrimSpace(r.PostFormValue("modifications")); m != "" {
		if !json.Valid([]byte(m)) {
			err := belay.Invalid("modifications", "the modifications must be JSON")
			if r.Header.Get("HX-Request") != "" {
				w.Header().Set("HX-Retarget", "#err-"+id)
				w.Header().Set("HX-Reswap", "innerHTML")
				d.render(w, http.StatusOK, "text", err.Message)
				return
			}
			d.fail(w, r, rq, err)
			return
		}
		in.Modifications = json.RawMessage(m)
	}
	_, err := d.svc.Decide(rq.ctx, in)
	htmx := r.Header.Get("HX-Request") != ""
	var be *belay.Error
	if errors.As(err, &be) && be.Code == belay.CodeHITLAlreadyDecided {
		notice := "Someone else decided this request first."
		if cp, gerr := d.svc.GetCheckpoint(rq.ctx, id); gerr == nil && cp.Decision != nil {
			dec := cp.Decision
			by := dec.UserID
			if dec.AutoTriggered {
				by = "the timeout"
			}
			notice = fmt.Sprintf("Already decided: %s (%s) by %s.", dec.Action, dec.SelectedOption, by)
		}
		if htmx {
			d.render(w, http.StatusOK, "notice", notice)
			return
		}
		d.render(w, http.StatusConflict, "error.html", page{Title: "Already decided", User: rq.sess.User, CSRF: rq.sess.CSRF, Data: notice})
		return
	}
	if err != nil {
		if htmx {
			// The card stays, with the reason in its error slot.
			msg := "Could not decide."
			if errors.As(err, &be) {
				msg = be.Message
			}
			w.Header().Set("HX-Retarget", "#err-"+id)
			w.Header().Set("HX-Reswap", "innerHTML")
			d.render(w, http.StatusOK, "text", msg)
			return
		}
		d.fail(w, r, rq, err)
		return
	}
	if htmx {
		w.WriteHeader(http.StatusOK)
		return
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// errPosition stops a Follow once it has told where the log ends.
var errPosition = errors.New("position known")

// errSignedOut ends a stream whose sign-in was signed out.
var errSignedOut = errors.New("signed out")

// feedBacklog is how many past events the event feed starts with.
const feedBacklog = 50

// events streams the event log to the browser as Server-Sent Events. By
// default each batch is one "change" event (the page then fetches what it
// shows again); with ?feed=1 every event is sent ("event": seq, type,
// session, checkpoint, time, no payload), starting with the newest few. The
// stream resumes from Last-Event-ID, so nothing is missed across reconnects.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, rq *request) {
	q := r.URL.Query()
	feed := q.Get("feed") != ""
	f := belay.EventFilter{After: belay.FromNow, SessionID: q.Get("session")}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		var n int64
		if _, err := fmt.Sscan(id, &n); err == nil && n >= 0 {
			f.After = n
		}
	} else if feed {
		var end int64
		err := d.svc.Follow(rq.ctx, f, 0, func(after int64, _ []belay.Event) error {
			end = after
			return errPosition
		})
		if err != nil && !errors.Is(err, errPosition) {
			d.fail(w, r, rq, err)
			return
		}
		f.After = max(0, end-feedBacklog)
	}
	rc := http.NewResponseController(w)
	started := false
	err := d.svc.Follow(rq.ctx, f, d.heartbeat, func(after int64, batch []belay.Event) error {
		// A sign-out (here or in another browser) ends the stream at its
		// next delivery, as revoking the token does.
		if out, err := d.signOuts.SignedOut(rq.ctx, rq.sess.ID); err != nil || out {
			return errors.Join(errSignedOut, err)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		var b bytes.Buffer
		switch {
		case !started:
			started = true
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			fmt.Fprintf(&b, "retry: 1000\nid: %d\nevent: hello\ndata: {}\n\n", after)
		case len(batch) == 0:
			b.WriteString(": ping\n\n")
		case feed:
			for _, e := range batch {
				data, _ := json.Marshal(map[string]any{"seq": e.Seq, "type": e.Type, "sessionId": e.SessionID,
					"checkpointId": e.CheckpointID, "createdAt": e.CreatedAt})
				fmt.Fprintf(&b, "id: %d\nevent: event\ndata: %s\n\n", e.Seq, data)
			}
		default:
			types := map[string]bool{}
			for _, e := range batch {
				types[e.Type] = true
			}
			list := make([]string, 0, len(types))
			for t := range types {
				list = append(list, t)
			}
			sort.Strings(list)
			data, _ := json.Marshal(map[string]any{"types": list})
			fmt.Fprintf(&b, "id: %d\nevent: change\ndata: %s\n\n", after, data)
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
		return rc.Flush()
	})
	switch {
	case started || err == nil:
	case errors.Is(err, errSignedOut):
		d.toSignin(w, r)
	default:
		d.fail(w, r, rq, err)
	}
}

func (d *Dashboard) feedPage(w http.ResponseWriter, r *http.Request, rq *request) {
	d.page(w, rq, "feed.html", "Events", "feed", nil)
}

type sessionRow struct {
	S        *belay.Session
	Done     int
	Total    int
	HasPlan  bool
	Progress int
}

func (d *Dashboard) sessionsPage(w http.ResponseWriter, r *http.Request, rq *request) {
	q := r.URL.Query()
	in := belay.ListSessionsInput{Status: belay.SessionStatus(q.Get("status")), ProjectPath: q.Get("project"),
		Cursor: q.Get("cursor"), Limit: 50}
	list, err := d.svc.ListSessions(rq.ctx, in)
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	rows := make([]sessionRow, 0, len(list.Items))
	for _, s := range list.Items {
		row := sessionRow{S: s}
		if s.Plan != nil && len(s.Plan.Tasks) > 0 {
			row.HasPlan = true
			row.Total = len(s.Plan.Tasks)
			for _, t := range s.Plan.Tasks {
				if t.Status == belay.TaskCompleted || t.Status == belay.TaskSkipped {
					row.Done++
				}
			}
			row.Progress = row.Done * 100 / row.Total
		}
		rows = append(rows, row)
	}
	d.page(w, rq, "sessions.html", "Sessions", "sessions", map[string]any{
		"Rows": rows, "List": list, "Status": in.Status, "Project": in.ProjectPath, "Statuses": belay.SessionStatuses,
	})
}

// maxStateBytes bounds the agent state shown on a page.
const maxStateBytes = 256 << 10

func prettyJSON(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var b bytes.Buffer
	if len(raw) <= maxStateBytes && json.Indent(&b, raw, "", "  ") == nil && b.Len() <= maxStateBytes {
		return b.String(), false
	}
	if len(raw) > maxStateBytes {
		return string(raw[:maxStateBytes]), true
	}
	return string(raw), false
}

type node struct {
	*belay.TimelineNode
	State     string
	Truncated bool
	Files     int
}

// maxTimeline bounds how many checkpoints a session page reads.
const maxTimeline = 500

func (d *Dashboard) sessionPage(w http.ResponseWriter, r *http.Request, rq *request) {
	s, err := d.svc.GetSession(rq.ctx, r.PathValue("id"))
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	var cps []*belay.Checkpoint
	cursor := ""
	more := false
	for len(cps) < maxTimeline {
		page, err := d.svc.ListCheckpoints(rq.ctx, belay.ListCheckpointsInput{SessionID: s.ID, Limit: 100, Cursor: cursor,
			OrderBy: belay.OrderCreatedAt, OrderDir: belay.OrderAsc})
		if err != nil {
			d.fail(w, r, rq, err)
			return
		}
		cps = append(cps, page.Items...)
		if !page.HasMore {
			break
		}
		cursor = page.NextCursor
		more = len(cps) >= maxTimeline
	}
	roots := belay.Timeline(cps, s.HeadCheckpointID)
	// Render depth-first as a flat list with indentation: a deep tree of
	// nested lists would be unreadable on a phone.
	var flat []struct {
		N     node
		Depth int
	}
	var walk func(ns []*belay.TimelineNode, depth int)
	walk = func(ns []*belay.TimelineNode, depth int) {
		for _, n := range ns {
			st, tr := prettyJSON(n.AgentState)
			files := 0
			if n.Files != nil {
				files = len(n.Files.Created) + len(n.Files.Modified) + len(n.Files.Deleted)
			}
			flat = append(flat, struct {
				N     node
				Depth int
			}{node{n, st, tr, files}, min(depth, 8)})
			// A single child continues the line; branches indent.
			if len(n.Children) == 1 {
				walk(n.Children, depth)
			} else {
				walk(n.Children, depth+1)
			}
		}
	}
	walk(roots, 0)
	var snaps []*belay.Checkpoint
	for _, c := range cps {
		if c.HasSnapshot() {
			snaps = append(snaps, c)
		}
	}
	d.page(w, rq, "session.html", s.Title, "sessions", map[string]any{"S": s, "Nodes": flat, "More": more, "Snaps": snaps,
		"Flash": d.takeFlash(w, r)})
}

// Diff display limits: a huge diff shows its first files only.
const (
	maxDiffFiles = 200
	maxDiffLines = 20000
)

type diffLine struct {
	Class, Text string
}

type diffFile struct {
	Header string
	Lines  []diffLine
}

func splitPatch(patch string) (files []diffFile, truncated bool) {
	lines := strings.Split(patch, "\n")
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "diff --git ") {
			if len(files) == maxDiffFiles {
				return files, true
			}
			files = append(files, diffFile{Header: l})
			continue
		}
		if len(files) == 0 {
			files = append(files, diffFile{})
		}
		if n++; n > maxDiffLines {
			return files, true
		}
		cls := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			cls = "meta"
		case strings.HasPrefix(l, "+"):
			cls = "add"
		case strings.HasPrefix(l, "-"):
			cls = "del"
		case strings.HasPrefix(l, "@@"):
			cls = "hunk"
		}
		f := &files[len(files)-1]
		f.Lines = append(f.Lines, diffLine{cls, l})
	}
	return files, false
}

func (d *Dashboard) diffPage(w http.ResponseWriter, r *http.Request, rq *request) {
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	s, err := d.svc.GetSession(rq.ctx, r.PathValue("id"))
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	res, err := d.svc.DiffCheckpoint(rq.ctx, belay.DiffInput{CheckpointID: from, To: to})
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	files := res.Files
	shown := len(files)
	if shown > maxDiffFiles {
		shown = maxDiffFiles
		files = files[:shown]
	}
	patch, truncated := splitPatch(res.Patch)
	d.page(w, rq, "diff.html", "Diff", "sessions", map[string]any{
		"S": s, "R": res, "Files": files, "Total": len(res.Files), "Shown": shown, "Patch": patch,
		"Truncated": truncated || shown < len(res.Files), "PatchFiles": len(patch),
	})
}

func (d *Dashboard) rollbackPreview(w http.ResponseWriter, r *http.Request, rq *request) {
	s, err := d.svc.GetSession(rq.ctx, r.PathValue("id"))
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	cp, err := d.svc.GetCheckpoint(rq.ctx, r.URL.Query().Get("to"))
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	if cp.SessionID != s.ID {
		d.fail(w, r, rq, belay.Invalid("to", "checkpoint %s is not in this session", cp.ID))
		return
	}
	res, err := d.svc.RestoreCheckpoint(rq.ctx, belay.RestoreInput{CheckpointID: cp.ID, DryRun: true})
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	d.page(w, rq, "rollback.html", "Roll back", "sessions", map[string]any{"S": s, "CP": cp, "R": res})
}

func (d *Dashboard) rollback(w http.ResponseWriter, r *http.Request, rq *request) {
	id := r.PathValue("id")
	cpID := r.PostFormValue("checkpoint")
	if r.PostFormValue("confirm") != "yes" {
		http.Redirect(w, r, "/sessions/"+url.PathEscape(id)+"/rollback?to="+url.QueryEscape(cpID), http.StatusSeeOther)
		return
	}
	cp, err := d.svc.GetCheckpoint(rq.ctx, cpID)
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	if cp.SessionID != id {
		d.fail(w, r, rq, belay.Invalid("checkpoint", "checkpoint %s is not in this session", cp.ID))
		return
	}
	res, err := d.svc.RestoreCheckpoint(rq.ctx, belay.RestoreInput{CheckpointID: cp.ID, Reason: strings.TrimSpace(r.PostFormValue("reason"))})
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	flash := fmt.Sprintf("Rolled back to #%d: %d files restored, %d removed.", cp.Seq, len(res.RestoredFiles), len(res.RemovedFiles))
	d.setFlash(w, r, flash)
	http.Redirect(w, r, "/sessions/"+url.PathEscape(id), http.StatusSeeOther)
}

func (d *Dashboard) searchPage(w http.ResponseWriter, r *http.Request, rq *request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	data := map[string]any{"Q": q}
	if q != "" {
		res, err := d.svc.SearchCheckpoints(rq.ctx, belay.SearchInput{Query: q, TopK: 20})
		if err != nil {
			d.fail(w, r, rq, err)
			return
		}
		data["R"] = res
	}
	d.render(w, http.StatusOK, "search.html", page{Title: "Search", User: rq.sess.User, CSRF: rq.sess.CSRF, Nav: "search", Search: q, Data: data})
}

// export downloads the session as the archive `belay import` reads.
func (d *Dashboard) export(w http.ResponseWriter, r *http.Request, rq *request) {
	s, err := d.svc.GetSession(rq.ctx, r.PathValue("id"))
	if err != nil {
		d.fail(w, r, rq, err)
		return
	}
	// Write into a buffer first so that a failure is still an error page.
	var b bytes.Buffer
	if err := d.svc.ExportSession(rq.ctx, s.ID, &b); err != nil {
		d.fail(w, r, rq, err)
		return
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="belay-session-`+s.ID+`.tar.gz"`)
	w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
	_, _ = b.WriteTo(w)
}

// setFlash leaves a one-time message for the next page, e.g. what a
// rollback did.
func (d *Dashboard) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: d.seal(flashCookie, msg), Path: "/", MaxAge: 60,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
}

// takeFlash returns the message setFlash left, and forgets it.
func (d *Dashboard) takeFlash(w http.ResponseWriter, r *http.Request) string {
	var msg string
	if !d.open(r, flashCookie, &msg) {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	return msg
}
