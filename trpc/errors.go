package trpc

import (
	"errors"
	"log/slog"

	"github.com/belayhq/belay"
)

// tRPC's error codes: its name for a failure, the JSON-RPC number it sends,
// and the HTTP status it implies (which an error of belay's answers with its
// code's status instead, as /v1 does).
type code struct {
	name   string
	number int
	status int
}

var (
	badRequest    = code{"BAD_REQUEST", -32600, 400}
	parseError    = code{"PARSE_ERROR", -32700, 400}
	unauthorized  = code{"UNAUTHORIZED", -32001, 401}
	forbidden     = code{"FORBIDDEN", -32003, 403}
	notFound      = code{"NOT_FOUND", -32004, 404}
	notSupported  = code{"METHOD_NOT_SUPPORTED", -32005, 405}
	conflict      = code{"CONFLICT", -32009, 409}
	tooLarge      = code{"PAYLOAD_TOO_LARGE", -32013, 413}
	unprocessable = code{"UNPROCESSABLE_CONTENT", -32022, 422}
	tooMany       = code{"TOO_MANY_REQUESTS", -32029, 429}
	timeout       = code{"TIMEOUT", -32008, 408}
	internal      = code{"INTERNAL_SERVER_ERROR", -32603, 500}
	unavailable   = code{"SERVICE_UNAVAILABLE", -32603, 503}
)

// codeByCode is the one table from belay's codes to tRPC's. The HTTP status
// is belay's (Code.HTTPStatus), so a tRPC client sees the same status as /v1
// (410 for an expired checkpoint, which tRPC has no name for); the belay code
// travels in data.appCode.
var codeByCode = map[belay.Code]code{
	belay.CodeValidation:         badRequest,
	belay.CodeNotFound:           notFound,
	belay.CodeCheckpointNotFound: notFound,
	belay.CodeSessionNotFound:    notFound,
	belay.CodeCheckpointExpired:  notFound,
	belay.CodeHITLNotRequired:    badRequest,
	belay.CodeHITLAlreadyDecided: conflict,
	belay.CodeInvalidOption:      badRequest,
	belay.CodeRestoreFailed:      internal,
	belay.CodeUnauthorized:       forbidden,
	belay.CodeUnauthenticated:    unauthorized,
	belay.CodeRateLimited:        tooMany,
	belay.CodeTimeout:            timeout,
	belay.CodeRequestTimeout:     timeout,
	belay.CodeCheckpointCorrupt:  unprocessable,
	belay.CodeConflict:           conflict,
	belay.CodeLeaseLost:          conflict,
	belay.CodeBudgetExceeded:     conflict,
	belay.CodeTooLarge:           tooLarge,
	belay.CodeMethodNotAllowed:   notSupported,
	belay.CodeInternal:           internal,
	belay.CodeStorageUnavailable: unavailable,
}

// errorShape is tRPC's error object.
type errorShape struct {
	Message string    `json:"message"`
	Code    int       `json:"code"`
	Data    errorData `json:"data"`
	// retryAfter is the seconds to wait before trying again, when the error
	// says so: the Retry-After header of an answer refused whole.
	retryAfter int
}

type errorData struct {
	Code       string         `json:"code"`
	HTTPStatus int            `json:"httpStatus"`
	Path       string         `json:"path,omitempty"`
	AppCode    belay.Code     `json:"appCode"`
	Details    map[string]any `json:"details,omitempty"`
}

// shape turns an error of a call to path into tRPC's error object. An error
// without a code is logged and sent as an internal error without its text.
func shape(log *slog.Logger, path string, err error) errorShape {
	var be *belay.Error
	if !errors.As(err, &be) {
		log.Error("trpc call failed", "path", path, "error", err)
		be = belay.Errorf(belay.CodeInternal, "internal error")
	}
	c, ok := codeByCode[be.Code]
	if !ok {
		c = internal
	}
	after, _ := be.RetryAfter()
	return errorShape{Message: be.Message, Code: c.number, retryAfter: after,
		Data: errorData{Code: c.name, HTTPStatus: be.Code.HTTPStatus(), Path: path, AppCode: be.Code, Details: be.Details}}
}

// protocolError is an error of the request itself, before any procedure.
func protocolError(c code, msg, path string) errorShape {
	return errorShape{Message: msg, Code: c.number, Data: errorData{Code: c.name, HTTPStatus: c.status, Path: path, AppCode: appCodeOf(c)}}
}

func appCodeOf(c code) belay.Code {
	switch c {
	case unauthorized:
		return belay.CodeUnauthenticated
	case notFound:
		return belay.CodeNotFound
	case notSupported:
		return belay.CodeMethodNotAllowed
	case tooLarge:
		return belay.CodeTooLarge
	}
	return belay.CodeValidation
}
