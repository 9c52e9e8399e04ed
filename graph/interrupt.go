package graph

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/belayhq/belay"
)

// InterruptRequest is what a paused run asks a person: it becomes the HITL
// request of the run's interrupt checkpoint, which `belay pending` lists and
// `belay decide` (or the API, or the timeout) answers.
type InterruptRequest struct {
	Title   string
	Message string
	// Options are the choices offered (at most belay.MaxHITLOptions);
	// Approve and Reject when none.
	Options []belay.HITLOption
	// Context is shown with the request; it must encode as a JSON object.
	Context any
	// Timeout, when set (1 minute to 24 hours, rounded up to a second),
	// applies DefaultAction (approve, reject or pause) when no one decides.
	Timeout       time.Duration
	DefaultAction belay.Action
}

// hitl turns the request into a checkpoint's HITL input. A rejection never
// fails the session by itself: the node gets the decision and decides what
// it means.
func (r InterruptRequest) hitl() (*belay.HITLInput, error) {
	h := &belay.HITLInput{Required: true, Title: r.Title, Message: r.Message, Options: r.Options, OnReject: belay.OnRejectContinue}
	if r.Context != nil {
		b, err := json.Marshal(r.Context)
		if err != nil {
			return nil, belay.Invalid("hitl.context", "the interrupt's context cannot be encoded as JSON: %v", err)
		}
		h.Context = b
	}
	switch {
	case r.Timeout > 0:
		h.Timeout = &belay.TimeoutInput{Duration: int(math.Ceil(r.Timeout.Seconds())), DefaultAction: r.DefaultAction}
	case r.DefaultAction != "":
		return nil, belay.Invalid("hitl.timeout.defaultAction", "a default action needs a timeout")
	}
	return h, h.Validate()
}

// Decision is the resume value of an interrupt that a person or a timeout
// decided: Interrupt returns it (or any type its JSON fits, such as a struct
// with only "option" and "feedback"). Passed as Command.Resume, it answers
// the interrupt's request with Option as if decided through belay, and so
// does any value that reads as one: a value whose JSON is an object of
// Decision's fields only, "option" among them, such as a map or the
// json.RawMessage of an API request. Its option must be offered and its
// Action, when set, the option's (INVALID_OPTION otherwise, before the node
// runs); the node gets it with the option's action, and the request records
// what the node got. Any other resume value (a string, say) chooses no
// option: the request is closed with its default option (the service needs
// one), its feedback saying that the run was resumed with a value that chose
// no option, and quoting it. Once the request is decided, only a value that
// repeats that decision is taken (see Resume).
type Decision struct {
	// Option is the chosen option's id; Action what it means.
	Option        string          `json:"option"`
	Action        belay.Action    `json:"action,omitempty"`
	Feedback      string          `json:"feedback,omitempty"`
	Modifications json.RawMessage `json:"modifications,omitempty"`
	// By is who decided and Automatic is set when a timeout did, as
	// belay records them. A resume value cannot say either: the node gets
	// the caller in the Resume's context as By ("" when it names none, as
	// with a remote service) and Automatic false, whatever the value says.
	By        string `json:"by,omitempty"`
	Automatic bool   `json:"automatic,omitempty"`
}

func decisionOf(d *belay.Decision) Decision {
	return Decision{Option: d.SelectedOption, Action: d.Action, Feedback: d.Feedback, Modifications: d.Modifications,
		By: d.UserID, Automatic: d.AutoTriggered}
}

// ErrInterrupted is what Interrupt returns when the run must pause; the node
// returns it (wrapped or not). The run pauses even when the node drops it:
// what the node returns after an unanswered interrupt is discarded.
var ErrInterrupted = errors.New("graph: the run pauses for a decision")

type nodeRunKey struct{}

// nodeRun is one execution of a node: the resume values its interrupts
// return, and the interrupt that paused it.
type nodeRun struct {
	node    string
	resumes []json.RawMessage
	calls   int
	// pending is the first interrupt without a resume value; index its
	// position among the node's Interrupt calls.
	pending *belay.HITLInput
	index   int
	// badResume is set when a resume value did not fit its interrupt.
	badResume error
	// emit sends a custom event to the run's stream; nil when none.
	emit func(name string, data any) bool
}

// Interrupt pauses the run for a person, inside a node. The Nth call of a
// node execution returns the Nth resume value of that node, decoded into T:
// the first time through, the call creates a HITL checkpoint from req and
// returns ErrInterrupted, which the node returns; the run then stops with
// status Interrupted. Resume runs the node again from its start — so all code
// before the Interrupt runs again — and this time the call returns the value.
//
// A resume value that does not fit T is a VALIDATION_ERROR from Resume, and
// the run stays interrupted. Outside a node, Interrupt returns an error.
func Interrupt[T any](ctx context.Context, req InterruptRequest) (T, error) {
	var zero T
	nr, _ := ctx.Value(nodeRunKey{}).(*nodeRun)
	if nr == nil {
		return zero, belay.Errorf(belay.CodeValidation, "graph.Interrupt is called outside a running graph node")
	}
	i := nr.calls
	nr.calls++
	if i < len(nr.resumes) {
		var v T
		if err := json.Unmarshal(nr.resumes[i], &v); err != nil {
			nr.badResume = belay.Invalid("resume", "resume value %d of node %q does not fit %T: %v", i+1, nr.node, v, err).
				With("node", nr.node).With("index", i)
			return zero, nr.badResume
		}
		return v, nil
	}
	if nr.pending == nil {
		h, err := req.hitl()
		if err != nil {
			return zero, err
		}
		nr.pending, nr.index = h, i
	}
	return zero, ErrInterrupted
}

// Command resumes an interrupted run. With Resume, the interrupted node runs
// again and its interrupt returns Resume, which answers the request (with
// its option when it reads as a Decision, see Decision); with neither Resume nor Goto, it returns the
// decision made through belay (an error while there is none). Once the
// request is decided, a Resume that says otherwise than the decision is
// HITL_ALREADY_DECIDED (see Resume for a forked run). Update, when set, is
// written over the state first, as UpdateState writes it: its JSON object's
// keys replace the values of the state's fields they name, matched as
// encoding/json matches them (case-insensitively); a key that names no field
// is a VALIDATION_ERROR. Goto instead leaves the interrupted node unfinished
// and goes on at that node (or END), answering an open request with its
// default option — which, as a resume value, takes a caller who may decide
// the request (UNAUTHORIZED otherwise, before any node runs); past a decided
// request, the decision stands and anyone who may resume the run goes on.
type Command struct {
	Resume any
	Goto   string
	Update any
	// Resumes answers several pending interrupts — parallel branches that
	// paused in one step — with a value each, by interrupt id (the id of
	// its HITL checkpoint). An interrupt it leaves out takes the decision
	// made through belay (CONFLICT while there is none), and so does one it
	// names whose request is decided: a value that says otherwise is
	// HITL_ALREADY_DECIDED, as for Resume. An id that is not pending is a
	// VALIDATION_ERROR, and so is a plain Resume while several are pending.
	Resumes map[string]any
	// InterruptID, when set, must be one of the run's pending interrupts
	// (its checkpoint id); anything else is a VALIDATION_ERROR.
	InterruptID string
}
