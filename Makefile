.PHONY: test build demo

# test installs and starts what the tests need (versitygw), then runs every
# test under the race detector with the integration environment set.
test:
	./scripts/test-env.sh go test -race -timeout 30m ./...

build:
	go build -o bin/kwal ./cmd/kwal

demo:
	go run ./cmd/kwal demo
