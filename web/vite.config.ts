import { defineConfig, type Plugin } from "vite";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

// The build goes into internal/webui/dist, which the Go package internal/webui embeds. Vite
// must not empty it (it holds the committed keep-file), so the previous
// build's files are removed here instead.
const outDir = fileURLToPath(new URL("../internal/webui/dist", import.meta.url));

function cleanPreviousBuild(): Plugin {
  return {
    name: "logbook-clean-previous-build",
    apply: "build",
    buildStart() {
      rmSync(`${outDir}/assets`, { recursive: true, force: true });
      rmSync(`${outDir}/index.html`, { force: true });
      rmSync(`${outDir}/tickets.html`, { force: true });
      rmSync(`${outDir}/notify.html`, { force: true });
      rmSync(`${outDir}/admin.html`, { force: true });
    },
  };
}

export default defineConfig({
  plugins: [cleanPreviousBuild()],
  build: {
    outDir,
    emptyOutDir: false,
    target: "es2022",
    sourcemap: false,
    // No inline assets: the server's content security policy allows
    // scripts and styles from the page's own origin only.
    assetsInlineLimit: 0,
    // One page per service over shared assets: the flights board
    // (index.html, served by `logbook flights serve`), the tickets page
    // (tickets.html, served by `logbook tickets serve`) and the notify
    // page (notify.html, served by `logbook notify serve`); internal/webui
    // serves each server its own, and to every server the admin page
    // (admin.html, at /admin).
    rolldownOptions: {
      input: {
        board: fileURLToPath(new URL("index.html", import.meta.url)),
        tickets: fileURLToPath(new URL("tickets.html", import.meta.url)),
        notify: fileURLToPath(new URL("notify.html", import.meta.url)),
        admin: fileURLToPath(new URL("admin.html", import.meta.url)),
      },
    },
  },
  server: {
    // `npx vite` for development, against a `logbook flights serve` on :8080 (the
    // board, at /), a `logbook tickets serve` on :8081 (/tickets.html) and
    // a `logbook notify serve` on :8082 (/notify.html).
    proxy: {
      "/api/tickets": "http://127.0.0.1:8081",
      "/api/notifications": "http://127.0.0.1:8082",
      "/api/notification-types": "http://127.0.0.1:8082",
      "/api/dead-letters": "http://127.0.0.1:8082",
      "/api/clubs": "http://127.0.0.1:8082",
      "/api/windows": "http://127.0.0.1:8082",
      "/api": "http://127.0.0.1:8080",
      "/admin/api": "http://127.0.0.1:8080",
    },
  },
});
