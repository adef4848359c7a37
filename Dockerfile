# kwal: one static binary, used by docker-compose.yml for every broker and the demo client.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/kwal ./cmd/kwal

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates netcat-openbsd && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/kwal /usr/local/bin/kwal
ENTRYPOINT ["/usr/local/bin/kwal"]
