package compat

import "github.com/sluice-mq/sluice/internal/testbroker"

// The external clients the suite drives, found and run as every suite
// does (internal/testbroker/tools.go).
var (
	needTool         = testbroker.NeedTool
	missing          = testbroker.MissingTool
	needPythonModule = testbroker.NeedPythonModule
	run              = testbroker.RunTool
	clip             = testbroker.Clip
)

const python = testbroker.Python
