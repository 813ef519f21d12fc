/**
 * The process's streams are made only when used (src/cli/main.ts): what a send says and reads
 * must not change for it. stdin that is /dev/null is known without reading it; any other stdin
 * (a file, another character device) is still watched for data that the body flag leaves unread;
 * a closed stdout pipe is still a quiet exit.
 */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, constants, openSync, readFileSync, readSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { execa } from "execa";
import { baseEnv, runCli, mailsendCommand, mailsendShell } from "../helpers/cli.js";
import { useRestRecorder, type RestRecorder } from "../helpers/rest-recorder.js";
import { scratch } from "../helpers/tmp.js";

const KEY = "msk_test_e2e_streams_7Hc2Vn";
const tmp = scratch();
let rec: RestRecorder;
useRestRecorder((r) => (rec = r));
afterAll(() => tmp.remove());

const MIN = ["-f", "a@example.com", "-t", "b@example.com", "-s", "Hi"];
const env = () => ({ ...baseEnv(), MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url });

/** A send whose stdin is the file (or device) at `path` itself, not a pipe fed from it. */
async function sendWithStdin(
  path: string,
  args: string[],
): Promise<{ exitCode: number | null; stdout: string; stderr: string }> {
  const fd = openSync(path, "r");
  try {
    const child = spawn(...mailsendCommand(["send", ...MIN, ...args]), {
      env: env(),
      stdio: [fd, "pipe", "pipe"],
      timeout: 20_000,
    });
    let stdout = "";
    let stderr = "";
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => (stderr += d));
    const [exitCode] = (await once(child, "close")) as [number | null];
    return { exitCode, stdout, stderr };
  } finally {
    closeSync(fd);
  }
}

describe("stdin, made only when read", () => {
  it("/dev/null with a body flag: sent, nothing said", async () => {
    const r = await sendWithStdin("/dev/null", ["--text", "x", "-q"]);
    expect(r).toEqual({ exitCode: 0, stdout: "", stderr: "" });
    expect(rec.requests).toHaveLength(1);
  });

  it("a file on stdin with a body flag: the warning that it is not read, and the flag's body is sent", async () => {
    const file = join(tmp.dir, "piped.txt");
    writeFileSync(file, "some report\n");
    const r = await sendWithStdin(file, ["--text", "x", "-q"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(/^warning: data on stdin is not read: the body comes from --text/m);
    expect(rec.requests[0]!.json).toMatchObject({ html: "<pre>x</pre>" });
  });

  it("a file on stdin is not read at all: a `while read` loop over it keeps its place", async () => {
    const file = join(tmp.dir, "list.txt");
    writeFileSync(file, "first\nsecond\n");
    const fd = openSync(file, "r");
    try {
      const child = spawn(...mailsendCommand(["send", ...MIN, "--text", "x", "-q"]), {
        env: env(),
        stdio: [fd, "ignore", "pipe"],
        timeout: 20_000,
      });
      const [exitCode] = (await once(child, "close")) as [number | null];
      expect(exitCode).toBe(0);
      // The file's offset is shared with the child: still at the start.
      const b = Buffer.alloc(64);
      expect(b.toString("utf8", 0, readSync(fd, b, 0, 64, null))).toBe("first\nsecond\n");
    } finally {
      closeSync(fd);
    }
  });

  it("another character device (/dev/zero) is not taken for /dev/null: the warning too", async () => {
    // The device is read (watched) while the send goes on: an answer that takes a second leaves
    // its first read time to come back, on a loaded machine too.
    rec.script({ delayMs: 1000 });
    const r = await sendWithStdin("/dev/zero", ["--html", "<p>x</p>", "-q"]);
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toMatch(/^warning: data on stdin is not read: the body comes from --html/m);
  });

  it("no body flag and stdin /dev/null is still 'missing a body' (64), said on stderr", async () => {
    const r = await runCli(["send", ...MIN], { env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url } });
    expect(r.exitCode).toBe(64);
    expect(r.stderr).toMatch(/^error: missing a body/m);
  });
});

describe("stdout, made only when written", () => {
  it("a dry run into a pipe closed early (| head -c 10) exits 0 and says nothing on stderr", async () => {
    const big = join(tmp.dir, "big.html");
    writeFileSync(big, `<p>${"x".repeat(2_000_000)}</p>`);
    const err = join(tmp.dir, "err.txt");
    const send = mailsendShell([
      "send",
      "--dry-run",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "Hi",
      "--html-file",
      big,
    ]);
    const script = `${send} 2>"${err}" </dev/null | head -c 10 >/dev/null; echo "\${PIPESTATUS[0]}"; cat "${err}"`;
    const r = await execa("bash", ["-c", script], { reject: false, extendEnv: false, env: env(), timeout: 20_000 });
    expect(String(r.stdout)).toBe("0");
  });

  it("a non-blocking pipe that fills up: the rest goes through process.stdout, every byte in order", async () => {
    const big = join(tmp.dir, "big2.html");
    writeFileSync(big, `<p>${Array.from({ length: 60_000 }, (_, i) => `line ${i}`).join("<br>")}</p>`);
    const args = [
      "send",
      "--dry-run",
      "-f",
      "a@example.com",
      "-t",
      "b@example.com",
      "-s",
      "Hi",
      "--html-file",
      big,
      "--idempotency-key",
      "k-1",
    ];
    // What it prints into a file, to compare with.
    const file = join(tmp.dir, "out.txt");
    const ffd = openSync(file, "w");
    const plain = spawn(...mailsendCommand(args), { env: env(), stdio: ["ignore", ffd, "inherit"] });
    closeSync(ffd);
    expect((await once(plain, "close"))[0]).toBe(0);
    const expected = readFileSync(file);
    expect(expected.length).toBeGreaterThan(500_000);

    // The same into a FIFO whose write end is non-blocking and read slowly: writes hit EAGAIN.
    const fifo = join(tmp.dir, "fifo");
    execFileSync("mkfifo", [fifo]);
    const rfd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const wfd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    const child = spawn(...mailsendCommand(args), { env: env(), stdio: ["ignore", wfd, "inherit"] });
    closeSync(wfd);
    const closed = once(child, "close");
    const chunks: Buffer[] = [];
    const buf = Buffer.alloc(16_384);
    for (let idle = 0; idle < 4000; ) {
      let n: number;
      try {
        n = readSync(rfd, buf, 0, buf.length, null);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EAGAIN") throw e;
        idle++;
        await new Promise((r) => setTimeout(r, 5));
        continue;
      }
      if (n === 0) break;
      chunks.push(Buffer.from(buf.subarray(0, n)));
      await new Promise((r) => setTimeout(r, 1));
    }
    closeSync(rfd);
    expect((await closed)[0]).toBe(0);
    expect(Buffer.concat(chunks).equals(expected)).toBe(true);
  });

  it("-q: a send that succeeds writes nothing at all", async () => {
    const r = await runCli(["send", ...MIN, "--text", "x", "-q"], {
      env: { MAILSEND_API_KEY: KEY, MAILSEND_BASE_URL: rec.url },
    });
    expect(r).toMatchObject({ exitCode: 0, stdout: "", stderr: "" });
  });
});
