.PHONY: test gotest bench-quick build demo

# test installs and starts what the tests need (versitygw, kcat, kafkajs,
# docker-compose), runs every test under the race detector with the
# integration environment set, after the quick benchmarks CI runs.
test: bench-quick gotest

gotest:
	./scripts/test-env.sh go test -race -timeout 30m ./...

# The quick runs of the benchmark commands: they must finish and write
# their reports (numbers on a shared CI machine are not judged here).
bench-quick:
	mkdir -p out/ci
	go run ./cmd/kwal bench latency --quick -q --out out/ci/latency
	go run ./cmd/kwal bench purgatory --quick --runs 1 --json out/ci/purgatory.json
	go run ./cmd/kwal cost --kip --out out/ci/cost > out/ci/cost.txt
	go run ./cmd/kwal bench failover --quick --out out/ci/failover
	go run ./cmd/kwal bench broker --cases one-broker --quick --runs 1 --out out/ci/broker > out/ci/broker.txt
	go test -run XXX -bench ProducePath -benchtime 200x ./kafkalog/ > out/ci/produce-validation.txt
	go run ./cmd/kwal bench scale --quick --out out/ci/scale > out/ci/scale.txt
	@ls out/ci/latency/report.md out/ci/latency/report.json out/ci/purgatory.json out/ci/cost.txt out/ci/failover/report.json out/ci/failover/failover.png out/ci/broker/report.json out/ci/broker/onebroker-cpu.png out/ci/produce-validation.txt out/ci/scale/report.json out/ci/scale/scale.png >/dev/null && echo "bench-quick: reports written under out/ci"

build:
	go build -o bin/kwal ./cmd/kwal

demo:
	go run ./cmd/kwal demo
