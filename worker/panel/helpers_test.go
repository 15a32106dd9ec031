package panel_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/internal/testsupport/workertest"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
)

// testTypes are the worker types the panel's tests drive.
var testTypes = workertest.Registry(map[string]worker.Factory{echoworker.TypeName: echoworker.New})

var testTrial = names.NewTrial("unit", "t1")

// startWorker runs worker index of typ in this process, named in repo.
func startWorker(t *testing.T, repo nameresolve.Repository, typ string, index int) *workertest.Running {
	t.Helper()
	return workertest.Start(t, worker.Options{
		Trial: testTrial, Registry: testTypes, Type: typ, Index: index, Host: "127.0.0.1", Repo: repo,
		IdleWait: 10 * time.Millisecond, Logger: workertest.Logger(t, slog.LevelDebug),
	})
}

func ctxT(t *testing.T) context.Context { return workertest.Ctx(t, 10*time.Second) }
