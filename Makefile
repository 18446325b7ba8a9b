# The two commands of the README. Everything else is in scripts/.
.PHONY: run test build

run:
	./scripts/run.sh

test:
	./scripts/test.sh

build:
	go build -o bin/logbook ./cmd/logbook
