package core_test

import (
	"context"

	"github.com/belayhq/belay"
)

// localCtx acts as the local CLI does: the database's own administrator.
var localCtx = belay.WithActor(context.Background(), belay.Actor{UserID: "local", Admin: true})
