module github.com/thindist/thindist

go 1.26.8

require (
	github.com/bazelbuild/remote-apis v0.0.0-20260908115904-76ddd98e1f92 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
