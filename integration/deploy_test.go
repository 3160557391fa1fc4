//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aifs/aifs/backend/s3/s3test"
	aifsfs "github.com/aifs/aifs/fs"
	"go.yaml.in/yaml/v3"
)

// The deployment artefacts of docs/deploy/ (docs/deploy.md), checked as far as this machine
// can: the systemd unit by systemd-analyze verify and by running its commands as systemd would
// (there is no systemd here to start it), the fstab line by systemd's fstab generator and by
// mount(8), the Kubernetes manifests by checking their field names against the Kubernetes API's
// and running the aifs command of the DaemonSet, the Dockerfile by running its go build line, and
// the reasons for hostPID by mounting in a pid namespace and a cgroup namespace of aifs's own.
// Each runs the real aifs against a real S3 server and reads the mount.

const deployDir = "../docs/deploy"

// deployFile returns the text of docs/deploy/NAME.
func deployFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deploySet packs a small tree into a new S3 server, whose credentials the processes under test
// get only from the files the deployment describes (the test's environment has none), and
// returns the server, the tree and the set's URL.
func deploySet(t *testing.T) (srv *s3test.Server, src, url string) {
	t.Helper()
	srv = s3test.Start(t)
	src = t.TempDir()
	for i := range 12 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("class%d", i%3), fmt.Sprintf("s%02d.bin", i)), randomBytes(uint64(900+i), 20000+i*977))
	}
	url = "s3://" + srv.Bucket + "/sets/deploy"
	pack := exec.Command(aifsBin, "pack", "--quiet", src, url)
	pack.Env = append(os.Environ(), srv.Env()...)
	if out, err := pack.CombinedOutput(); err != nil {
		t.Fatalf("aifs pack to S3: %v\n%s", err, out)
	}
	return srv, src, url
}

// wantTree checks that the mount at mnt serves every file of src with its bytes.
func wantTree(t *testing.T, what, src, mnt string) {
	t.Helper()
	want, got := sourceEntries(t, src, true), sourceEntries(t, mnt, true)
	compareEntries(t, what, want, got)
	if digest(want) != digest(got) {
		t.Errorf("%s: the content digest differs from the source", what)
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// daemonProc is an aifs process started the way a service manager starts one, in the foreground.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

// startDaemonProc starts cmd; it is killed at cleanup if still running.
func startDaemonProc(t *testing.T, cmd *exec.Cmd) *daemonProc {
	t.Helper()
	p := &daemonProc{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("%q: %v", cmd.Args, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends sig, as a service manager stops the service, and checks that the process exits 0
// within 20 s and leaves nothing mounted at mnt.
func (p *daemonProc) stop(t *testing.T, sig syscall.Signal, mnt string) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%q: still running 20 s after %v", p.cmd.Args, sig)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%q exited %d after %v, want 0\n%s", p.cmd.Args, code, sig, clip(p.stderr.String()))
	}
	if isMounted(mnt) {
		t.Errorf("%s is still mounted after %v", mnt, sig)
	}
}

// ---- systemd ----

// unitFile is a systemd unit: each "Section.Key" with its values in order.
type unitFile map[string][]string

// parseUnit reads a unit file (no line continuations: the units here have none).
func parseUnit(t *testing.T, text string) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		case strings.HasSuffix(line, `\`):
			t.Fatalf("unit line %d: continuation lines are not supported here", i+1)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("unit line %d: %q is no assignment", i+1, line)
			}
			k = section + "." + strings.TrimSpace(k)
			u[k] = append(u[k], strings.TrimSpace(v))
		}
	}
	return u
}

// one returns the single value of key.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	if len(u[key]) != 1 {
		t.Fatalf("the unit has %d %s, want 1", len(u[key]), key)
	}
	return u[key][0]
}

// parseEnvFile reads a systemd EnvironmentFile: VAR=value lines, # and ; comments, a value in
// double or single quotes taken without them.
func parseEnvFile(t *testing.T, text string) [][2]string {
	t.Helper()
	var env [][2]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t\"'$") {
			t.Fatalf("environment file line %q is no VAR=value", line)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env = append(env, [2]string{strings.TrimSpace(k), v})
	}
	return env
}

// envValue returns the last value env gives key, as the last assignment wins in systemd.
func envValue(env [][2]string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if env[i][0] == key {
			return env[i][1], true
		}
	}
	return "", false
}

// unitWord is a word of an Exec line; whole says it was one unquoted $VAR.
type unitWord struct {
	s     string
	whole bool
}

// splitUnitCommand splits an Exec line into words as systemd does: at blanks, with "..." and
// '...' quoting (no backslash escapes: the unit has none).
func splitUnitCommand(t *testing.T, line string) []unitWord {
	t.Helper()
	var words []unitWord
	var cur strings.Builder
	in, quoted, inWord := byte(0), false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in != 0 && c == in:
			in = 0
		case in != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			in, quoted, inWord = c, true, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, unitWord{cur.String(), !quoted && isWholeVar(cur.String())})
				cur.Reset()
				quoted, inWord = false, false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if in != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, unitWord{cur.String(), !quoted && isWholeVar(cur.String())})
	}
	return words
}

var wholeVar = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*$`)
var bracedVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func isWholeVar(s string) bool { return wholeVar.MatchString(s) }

// unitCommand turns an Exec line into argv as systemd does with env: ${VAR} anywhere becomes
// the value as it is, a word $VAR becomes the value split at blanks (zero or more words), $VAR
// inside a word is left for the program. It returns whether the line had the "-" prefix.
func unitCommand(t *testing.T, line string, env [][2]string) (argv []string, ignoreFailure bool) {
	t.Helper()
	if strings.HasPrefix(line, "-") {
		ignoreFailure, line = true, line[1:]
	}
	if line != "" && strings.ContainsRune("@+!:", rune(line[0])) {
		t.Fatalf("exec prefix %q: not emulated here", line[:1])
	}
	for _, w := range splitUnitCommand(t, line) {
		if w.whole {
			v, _ := envValue(env, w.s[1:])
			argv = append(argv, strings.Fields(v)...)
			continue
		}
		argv = append(argv, bracedVar.ReplaceAllStringFunc(w.s, func(ref string) string {
			v, _ := envValue(env, ref[2:len(ref)-1])
			return v
		}))
	}
	return argv, ignoreFailure
}

// systemdPath is the PATH systemd gives services.
const systemdPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// unitRun is docs/deploy/aifs@.service as this test runs it: instance "imagenet", the unit's
// paths moved under a temporary root, the aifs binary under test, and the example .conf and
// credentials files with the test's bucket, server and directories put in.
type unitRun struct {
	unit unitFile
	env  [][2]string // what EnvironmentFile= gives the service, after systemd's PATH
	mnt  string
}

func newUnitRun(t *testing.T, srv *s3test.Server, url string) *unitRun {
	t.Helper()
	root := t.TempDir()
	text := deployFile(t, "aifs@.service")
	for _, r := range [][2]string{{"/usr/local/bin/aifs", aifsBin}, {"/mnt/aifs/", root + "/mnt/"}, {"/etc/aifs/", root + "/etc/"}, {"%i", "imagenet"}} {
		if !strings.Contains(text, r[0]) {
			t.Fatalf("aifs@.service does not mention %s", r[0])
		}
		text = strings.ReplaceAll(text, r[0], r[1])
	}
	r := &unitRun{unit: parseUnit(t, text), mnt: root + "/mnt/imagenet"}
	t.Cleanup(func() { unmount(t, r.mnt, 0) }) // before t.TempDir removes root

	conf := deployFile(t, "aifs.conf")
	confEnv := parseEnvFile(t, conf)
	for key, val := range map[string]string{"AIFS_SOURCE": url, "AIFS_CACHE_DIR": filepath.Join(root, "nvme", "aifs-cache", "imagenet")} {
		old, ok := envValue(confEnv, key)
		if !ok || old == "" {
			t.Fatalf("aifs.conf sets no %s", key)
		}
		conf = strings.Replace(conf, key+"="+old, key+"="+val, 1)
	}
	opts, _ := envValue(confEnv, "AIFS_OPTIONS")
	if m := regexp.MustCompile(`127\.0\.0\.1:\d+`).FindString(opts); m != "" {
		conf = strings.Replace(conf, m, freeAddr(t), 1) // a port of its own: the test may run beside a real one
	}
	creds := deployFile(t, "credentials")
	credEnv := parseEnvFile(t, creds)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := envValue(credEnv, k); ok {
			creds = strings.Replace(creds, k+"="+old, k+"="+v, 1)
		} else if k == "AWS_ENDPOINT_URL" && strings.Contains(creds, "#"+k+"=") {
			creds = regexp.MustCompile(`(?m)^#`+k+`=.*$`).ReplaceAllString(creds, k+"="+v)
		} else if k != "AWS_SESSION_TOKEN" {
			t.Fatalf("the credentials file has no %s", k)
		}
	}
	mkdir(t, root+"/etc")
	writeFile(t, root+"/etc/imagenet.conf", []byte(conf))
	writeFile(t, root+"/etc/credentials", []byte(creds))

	r.env = [][2]string{{"PATH", strings.TrimPrefix(systemdPath, "PATH=")}}
	for _, f := range r.unit["Service.EnvironmentFile"] {
		optional := strings.HasPrefix(f, "-")
		b, err := os.ReadFile(strings.TrimPrefix(f, "-"))
		if err != nil && !optional {
			t.Fatalf("EnvironmentFile %s: %v", f, err)
		}
		r.env = append(r.env, parseEnvFile(t, string(b))...)
	}
	return r
}

// environ returns the service's environment, and extra, as VAR=value strings.
func (r *unitRun) environ(extra ...string) []string {
	env := make([]string, 0, len(r.env)+len(extra))
	for _, kv := range r.env {
		env = append(env, kv[0]+"="+kv[1])
	}
	return append(env, extra...)
}

// exec runs the Exec lines of key in order, as systemd runs them before or after the main
// process, and returns the first failure that the line's "-" does not excuse.
func (r *unitRun) exec(t *testing.T, key string, extraEnv ...string) error {
	t.Helper()
	for _, line := range r.unit["Service."+key] {
		argv, ignore := unitCommand(t, line, r.env)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = r.environ(extraEnv...)
		cmd.WaitDelay = time.Second
		done := make(chan error, 1)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s=%s: %w", key, line, err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			err = fmt.Errorf("still running after a minute: %w", <-done)
		}
		if err != nil && !ignore {
			return fmt.Errorf("%s=%s: %w\n%s", key, line, err, out.Bytes())
		}
	}
	return nil
}

// start runs ExecStartPre, starts ExecStart and runs ExecStartPost with $MAINPID, as systemd
// starts the unit. It returns the main process and the outcome of ExecStartPost.
func (r *unitRun) start(t *testing.T) (*daemonProc, error) {
	t.Helper()
	if err := r.exec(t, "ExecStartPre"); err != nil {
		t.Fatal(err)
	}
	argv, _ := unitCommand(t, r.unit.one(t, "Service.ExecStart"), r.env)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = r.environ()
	p := startDaemonProc(t, cmd)
	return p, r.exec(t, "ExecStartPost", "MAINPID="+strconv.Itoa(cmd.Process.Pid))
}

// killSignal returns the unit's KillSignal (default SIGTERM).
func (r *unitRun) killSignal(t *testing.T) syscall.Signal {
	t.Helper()
	signals := map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT}
	name := "SIGTERM"
	if v := r.unit["Service.KillSignal"]; len(v) > 0 {
		name = v[len(v)-1]
	}
	sig, ok := signals[name]
	if !ok {
		t.Fatalf("KillSignal=%s: aifs unmounts on SIGTERM and SIGINT only", name)
	}
	return sig
}

// TestDeploySystemdVerify runs systemd-analyze verify on the unit (a copy naming the aifs binary
// under test: verify refuses a unit whose programs do not exist), for the template and for an
// instance. Any complaint about the unit fails the test; so that the check is known to work, a
// copy with a misspelt setting and one naming a missing program must draw complaints.
func TestDeploySystemdVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze is missing: install Debian's systemd package (scripts/test.sh does)")
	}
	unit := deployFile(t, "aifs@.service")
	if !strings.Contains(unit, "ExecStart=/usr/local/bin/aifs ") {
		t.Fatalf("the unit's ExecStart does not run /usr/local/bin/aifs (where scripts/install.sh puts it)")
	}
	verify := func(text string, instance string) (int, string) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "aifs@.service"), []byte(strings.ReplaceAll(text, "/usr/local/bin/aifs", aifsBin)))
		cmd := exec.Command("systemd-analyze", "verify", "--man=no", filepath.Join(dir, "aifs@"+instance+".service"))
		out, _ := cmd.CombinedOutput()
		var about []string // lines about this unit: verify also reports on units it pulls in
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "aifs@") {
				about = append(about, line)
			}
		}
		return cmd.ProcessState.ExitCode(), strings.Join(about, "\n")
	}
	for _, instance := range []string{"", "imagenet"} {
		if code, out := verify(unit, instance); code != 0 || out != "" {
			t.Errorf("systemd-analyze verify aifs@%s.service: exit %d\n%s", instance, code, out)
		}
	}
	if _, out := verify(strings.Replace(unit, "KillSignal=", "KilSignal=", 1), "imagenet"); !strings.Contains(out, "KilSignal") {
		t.Errorf("systemd-analyze verify did not report a misspelt key: %q", out)
	}
	if code, _ := verify(strings.Replace(unit, "ExecStart=/usr/local/bin/aifs ", "ExecStart=/nonexistent/aifs ", 1), "imagenet"); code == 0 {
		t.Errorf("systemd-analyze verify passed a unit whose program does not exist")
	}

	// The settings docs/deploy.md promises.
	u := parseUnit(t, unit)
	for key, want := range map[string]string{"Unit.Wants": "network-online.target", "Unit.After": "network-online.target",
		"Service.Type": "exec", "Service.Restart": "on-failure", "Service.KillSignal": "SIGTERM", "Install.WantedBy": "multi-user.target"} {
		if !slices.Contains(u[key], want) {
			t.Errorf("%s=%s missing (has %q)", key, want, u[key])
		}
	}
	for _, sandbox := range []string{"PrivateTmp", "ProtectSystem", "ProtectHome", "PrivateDevices", "PrivateMounts", "MountFlags"} {
		if _, ok := u["Service."+sandbox]; ok {
			t.Errorf("Service.%s gives the service its own mount namespace: nobody else would see the mount", sandbox)
		}
	}
	if argv, _ := unitCommand(t, u.one(t, "Service.ExecStart"), nil); len(argv) < 3 || argv[1] != "mount" || !slices.Contains(argv, "-f") {
		t.Errorf("ExecStart runs %q: want aifs mount -f (Type=exec needs the daemon in the foreground)", argv)
	}
}

// TestDeploySystemdUnit runs the unit's commands as systemd would (there is no systemd here):
// ExecStartPre, ExecStart with the environment of its EnvironmentFiles (the S3 credentials come
// only from there), ExecStartPost, which must return once the mount is live; the files read
// back; KillSignal ends it with status 0 and nothing mounted. After a kill -9 (what Restart= is
// for) ExecStartPre clears the dead mount and the unit starts again. With the S3 server down
// aifs exits 1, which Restart=on-failure retries (RestartPreventExitStatus=2 is for usage
// errors only), and ExecStartPost fails at once instead of waiting for the time-out.
func TestDeploySystemdUnit(t *testing.T) {
	srv, src, url := deploySet(t)
	r := newUnitRun(t, srv, url)

	p, err := r.start(t)
	if err != nil {
		t.Fatalf("ExecStartPost: %v\naifs: %s", err, clip(p.stderr.String()))
	}
	wantTree(t, "aifs@imagenet", src, r.mnt)
	p.stop(t, r.killSignal(t), r.mnt)

	p, err = r.start(t)
	if err != nil {
		t.Fatalf("second start: %v\naifs: %s", err, clip(p.stderr.String()))
	}
	p.cmd.Process.Kill()
	<-p.done
	// The keeper killed, its daemon gets SIGTERM (its parent-death signal) and unmounts; a
	// daemon that cannot leaves a dead mount. Never a mount that seems to work.
	var st syscall.Statfs_t
	for end := time.Now().Add(10 * time.Second); isMounted(r.mnt); time.Sleep(50 * time.Millisecond) {
		err := syscall.Statfs(r.mnt, &st)
		if errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EIO) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after kill -9: statfs %s: %v, still mounted 10 s on; want it unmounted by its daemon, or dead (ENOTCONN, ECONNABORTED, EIO)", r.mnt, err)
		}
	}
	if err := r.exec(t, "ExecStartPre"); err != nil || isMounted(r.mnt) {
		t.Fatalf("ExecStartPre after kill -9: %v; the dead mount is still there: %v", err, isMounted(r.mnt))
	}
	p, err = r.start(t) // what Restart=on-failure does
	if err != nil {
		t.Fatalf("restart after kill -9: %v\naifs: %s", err, clip(p.stderr.String()))
	}
	wantTree(t, "aifs@imagenet after a restart", src, r.mnt)
	p.stop(t, r.killSignal(t), r.mnt)

	srv.Stop()
	begin := time.Now()
	p, err = r.start(t)
	if err == nil {
		t.Errorf("ExecStartPost succeeded with the S3 server down")
	}
	<-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != 1 || slices.Contains(r.unit["Service.RestartPreventExitStatus"], "1") {
		t.Errorf("S3 down: aifs exited %d, want 1, which the unit restarts\n%s", code, clip(p.stderr.String()))
	}
	t.Logf("with the S3 server down the start failed after %v", time.Since(begin).Round(time.Millisecond))
	if isMounted(r.mnt) {
		t.Errorf("%s mounted although the start failed", r.mnt)
	}
}

// fstabLine returns the one entry of docs/deploy/fstab, split into fields.
func fstabLine(t *testing.T) []string {
	t.Helper()
	var entry []string
	for _, line := range strings.Split(deployFile(t, "fstab"), "\n") {
		if line = strings.TrimSpace(line); line == "" || line[0] == '#' {
			continue
		}
		if entry != nil {
			t.Fatalf("docs/deploy/fstab has more than one entry")
		}
		entry = strings.Fields(line)
	}
	if len(entry) != 6 || entry[2] != "fuse.aifs" {
		t.Fatalf("docs/deploy/fstab: %q is no fuse.aifs entry of 6 fields", entry)
	}
	return entry
}

// TestDeployFstab runs systemd's fstab generator on docs/deploy/fstab: the mount unit it makes
// is wanted (nofail: not required) by remote-fs.target (_netdev: a network file system, mounted
// once the network is online) and passes systemd-analyze verify. Then mount(8) mounts the entry
// (with the test's bucket and directories put in) from that fstab through mount.fuse.aifs,
// with the credentials in the environment, as a drop-in's EnvironmentFile= gives them; the
// files read back, log_file gets the daemon's log, and umount ends the daemon.
func TestDeployFstab(t *testing.T) {
	entry := fstabLine(t)
	gen := "/usr/lib/systemd/system-generators/systemd-fstab-generator"
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("%s is missing: install Debian's systemd package (scripts/test.sh does)", gen)
	}
	out := t.TempDir()
	cmd := exec.Command(gen, out, out, out)
	fstabPath, err := filepath.Abs(filepath.Join(deployDir, "fstab"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "SYSTEMD_FSTAB="+fstabPath, "SYSTEMD_LOG_LEVEL=warning")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-fstab-generator: %v\n%s", err, b)
	}
	unitName := strings.ReplaceAll(strings.TrimPrefix(entry[1], "/"), "/", "-") + ".mount"
	unit, err := os.ReadFile(filepath.Join(out, unitName))
	if err != nil {
		t.Fatalf("the generator made no %s: %v", unitName, err)
	}
	for _, want := range []string{"Type=fuse.aifs", "What=" + entry[0], "Where=" + entry[1]} {
		if !strings.Contains(string(unit), want+"\n") {
			t.Errorf("%s lacks %s:\n%s", unitName, want, unit)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "remote-fs.target.wants", unitName)); err != nil {
		t.Errorf("%s is not wanted by remote-fs.target (_netdev, nofail): %v", unitName, err)
	}
	for _, wrong := range []string{"remote-fs.target.requires", "local-fs.target.wants", "local-fs.target.requires"} {
		if _, err := os.Lstat(filepath.Join(out, wrong, unitName)); err == nil {
			t.Errorf("%s is in %s", unitName, wrong)
		}
	}
	if b, err := exec.Command("systemd-analyze", "verify", "--man=no", filepath.Join(out, unitName)).CombinedOutput(); err != nil || bytes.Contains(b, []byte(unitName)) {
		t.Errorf("systemd-analyze verify %s: %v\n%s", unitName, err, b)
	}

	// mount(8) with that entry, in an fstab of the test's own.
	srv, src, url := deploySet(t)
	root := t.TempDir()
	mnt, logFile := filepath.Join(root, "mnt"), filepath.Join(root, "aifs.log")
	mkdir(t, mnt)
	opts := strings.Split(entry[3], ",")
	for i, o := range opts {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "cache_dir":
			opts[i] = k + "=" + filepath.Join(root, "cache")
		case "log_file":
			opts[i] = k + "=" + logFile
		case "x-systemd.requires-mounts-for":
			opts[i] = k + "=" + root
		default:
			if strings.HasPrefix(v, "/") {
				t.Fatalf("option %s names a path of this machine that the test does not replace", o)
			}
		}
	}
	entry[0], entry[1], entry[3] = url, mnt, strings.Join(opts, ",")
	fstab := filepath.Join(root, "fstab")
	writeFile(t, fstab, []byte(strings.Join(entry, " ")+"\n"))
	installMountHelper(t)
	mount := exec.Command("mount", "-T", fstab, mnt)
	mount.Env = append([]string{systemdPath}, srv.Env()...)
	if b, err := mount.CombinedOutput(); err != nil {
		t.Fatalf("mount -T %s %s: %v\n%s", fstab, mnt, err, b)
	}
	pid := daemonPID(t, mnt)
	t.Cleanup(func() { unmount(t, mnt, pid) })
	wantTree(t, "fstab mount", src, mnt)
	if b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte("\tmounted\t")) {
		t.Errorf("log_file %s has no \"mounted\" line:\n%s", logFile, b)
	}
	if b, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v\n%s", err, b)
	}
	if !waitExit(pid, 10*time.Second) {
		t.Errorf("the daemon is still running after umount")
	}
}

// installMountHelper points /sbin/mount.fuse.aifs, what mount(8) runs for type fuse.aifs, at the
// binary under test for the rest of the test (an installed helper is moved aside meanwhile).
func installMountHelper(t *testing.T) {
	t.Helper()
	const sbin = "/sbin/mount.fuse.aifs"
	if _, err := os.Lstat(sbin); err == nil {
		if err := os.Rename(sbin, sbin+".aifs-test"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Rename(sbin+".aifs-test", sbin) })
	}
	if err := os.Symlink(aifsBin, sbin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sbin) })
}

// ---- Kubernetes ----

// k8sFields is the part of the Kubernetes API (v1.37) that the manifests are held to: the
// fields an object may have and, for a field whose value is checked in turn, the fields that
// value may have; each item of a list is held to the list's entry. nil leaves a value
// unchecked: maps of free keys (labels, resource names) and what the manifests do not use. A
// misspelt or misplaced field fails here, where kubectl apply would drop it with a warning or
// the API server refuse it.
type k8sFields map[string]k8sFields

// k8sNames returns the fields named in names (space-separated), unchecked but for those in
// checked, which must be among them.
func k8sNames(names string, checked ...k8sFields) k8sFields {
	f := k8sFields{}
	for _, n := range strings.Fields(names) {
		f[n] = nil
	}
	for _, c := range checked {
		for n, sub := range c {
			if _, ok := f[n]; !ok {
				panic("k8sNames: checked field " + n + " is not among " + names)
			}
			f[n] = sub
		}
	}
	return f
}

// The fields of the API types the manifests use (k8s.io/api v0.37 core/v1 and apps/v1, meta/v1
// ObjectMeta without the fields only the server sets).
var (
	k8sMetaFields   = k8sNames("name generateName namespace labels annotations ownerReferences finalizers")
	k8sProbeFields  = k8sNames("exec httpGet tcpSocket grpc initialDelaySeconds timeoutSeconds periodSeconds successThreshold failureThreshold terminationGracePeriodSeconds", k8sFields{"exec": k8sNames("command")})
	k8sEnvRefFields = k8sNames("name optional")

	k8sContainerFields = k8sNames("name image command args workingDir ports envFrom env resources resizePolicy restartPolicy restartPolicyRules volumeMounts volumeDevices livenessProbe readinessProbe startupProbe lifecycle terminationMessagePath terminationMessagePolicy imagePullPolicy securityContext stdin stdinOnce tty", k8sFields{
		"ports":           k8sNames("name hostPort containerPort protocol hostIP"),
		"env":             k8sNames("name value valueFrom"),
		"envFrom":         k8sNames("prefix configMapRef secretRef", k8sFields{"configMapRef": k8sEnvRefFields, "secretRef": k8sEnvRefFields}),
		"resources":       k8sNames("limits requests claims"),
		"volumeMounts":    k8sNames("name readOnly recursiveReadOnly mountPath subPath mountPropagation subPathExpr bindMountOptions"),
		"livenessProbe":   k8sProbeFields,
		"readinessProbe":  k8sProbeFields,
		"startupProbe":    k8sProbeFields,
		"securityContext": k8sNames("capabilities privileged seLinuxOptions windowsOptions runAsUser runAsGroup runAsNonRoot readOnlyRootFilesystem allowPrivilegeEscalation procMount seccompProfile appArmorProfile"),
	})

	k8sPodSpecFields = k8sNames("volumes initContainers containers ephemeralContainers restartPolicy terminationGracePeriodSeconds activeDeadlineSeconds dnsPolicy nodeSelector serviceAccountName serviceAccount automountServiceAccountToken nodeName hostNetwork hostPID hostIPC shareProcessNamespace securityContext imagePullSecrets hostname subdomain affinity schedulerName tolerations hostAliases priorityClassName priority dnsConfig readinessGates runtimeClassName enableServiceLinks preemptionPolicy overhead topologySpreadConstraints setHostnameAsFQDN os hostUsers schedulingGates resourceClaims resources hostnameOverride schedulingGroup evictionResponders", k8sFields{
		"volumes": k8sNames("name hostPath emptyDir gcePersistentDisk awsElasticBlockStore gitRepo secret nfs iscsi glusterfs persistentVolumeClaim rbd flexVolume cinder cephfs flocker downwardAPI fc azureFile configMap vsphereVolume quobyte azureDisk photonPersistentDisk projected portworxVolume scaleIO storageos csi ephemeral image",
			k8sFields{"hostPath": k8sNames("path type")}),
		"initContainers": k8sContainerFields,
		"containers":     k8sContainerFields,
		"tolerations":    k8sNames("key operator value effect tolerationSeconds"),
	})

	// k8sKinds: the apiVersion and the spec's fields of each kind the manifests hold.
	k8sKinds = map[string]struct {
		apiVersion string
		spec       k8sFields
	}{
		"DaemonSet": {"apps/v1", k8sNames("selector template updateStrategy minReadySeconds revisionHistoryLimit", k8sFields{
			"updateStrategy": k8sNames("type rollingUpdate"),
			"template":       k8sNames("metadata spec", k8sFields{"metadata": k8sMetaFields, "spec": k8sPodSpecFields}),
		})},
		"Pod": {"v1", k8sPodSpecFields},
		"ResourceQuota": {"v1", k8sNames("hard scopes scopeSelector", k8sFields{
			"scopeSelector": k8sNames("matchExpressions", k8sFields{"matchExpressions": k8sNames("scopeName operator values")}),
		})},
	}
)

// k8sFieldErrors returns a line for each key of node, an object or a list of objects, that
// fields lacks or that comes twice, as deep as fields reaches: "line N: PATH: ...".
func k8sFieldErrors(node *yaml.Node, fields k8sFields, path string) []string {
	var bad []string
	switch node.Kind {
	case yaml.SequenceNode:
		for i, item := range node.Content {
			bad = append(bad, k8sFieldErrors(item, fields, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return bad
	case yaml.MappingNode:
	default:
		return []string{fmt.Sprintf("line %d: %s: %q is no object", node.Line, path, node.Value)}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		sub, known := fields[k.Value]
		switch {
		case !known:
			bad = append(bad, fmt.Sprintf("line %d: %s: unknown field %q", k.Line, path, k.Value))
		case seen[k.Value]:
			bad = append(bad, fmt.Sprintf("line %d: %s: field %q given twice", k.Line, path, k.Value))
		case sub != nil:
			bad = append(bad, k8sFieldErrors(v, sub, path+"."+k.Value)...)
		}
		seen[k.Value] = true
	}
	return bad
}

// k8sManifest parses the YAML documents of a manifest and checks each against k8sKinds: a
// known kind and its apiVersion, and the fields. It returns the documents by kind (one each at
// most) and what is wrong.
func k8sManifest(text string) (map[string]*yaml.Node, []string) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	docs := map[string]*yaml.Node{}
	var bad []string
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return docs, bad
		} else if err != nil {
			return docs, append(bad, err.Error())
		}
		if len(doc.Content) == 0 {
			continue
		}
		top := doc.Content[0]
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string
		}
		if err := top.Decode(&head); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		kind, ok := k8sKinds[head.Kind]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("line %d: kind %q is not checked here", top.Line, head.Kind))
			continue
		case head.APIVersion != kind.apiVersion:
			bad = append(bad, fmt.Sprintf("line %d: %s has apiVersion %q, want %s", top.Line, head.Kind, head.APIVersion, kind.apiVersion))
		case docs[head.Kind] != nil:
			bad = append(bad, fmt.Sprintf("line %d: a second %s", top.Line, head.Kind))
		}
		fields := k8sNames("apiVersion kind metadata spec", k8sFields{"metadata": k8sMetaFields, "spec": kind.spec})
		bad = append(bad, k8sFieldErrors(top, fields, head.Kind)...)
		docs[head.Kind] = top
	}
}

// The parts of the API types the test reads (yaml decodes only these; k8sManifest has
// checked every field name).
type (
	k8sPodSpec struct {
		HostPID           bool           `yaml:"hostPID"`
		PriorityClassName string         `yaml:"priorityClassName"`
		InitContainers    []k8sContainer `yaml:"initContainers"`
		Containers        []k8sContainer
		Volumes           []k8sVolume
	}
	k8sContainer struct {
		Name, Image   string
		Command, Args []string
		Env           []k8sEnvVar
		EnvFrom       []struct {
			SecretRef *struct{ Name string } `yaml:"secretRef"`
		} `yaml:"envFrom"`
		VolumeMounts    []k8sVolumeMount           `yaml:"volumeMounts"`
		SecurityContext *struct{ Privileged bool } `yaml:"securityContext"`
		Resources       struct{ Limits, Requests map[string]any }
		ReadinessProbe  *struct{ Exec *struct{ Command []string } } `yaml:"readinessProbe"`
	}
	k8sEnvVar struct {
		Name, Value string
		ValueFrom   any `yaml:"valueFrom"`
	}
	k8sVolumeMount struct {
		Name             string
		MountPath        string `yaml:"mountPath"`
		ReadOnly         bool   `yaml:"readOnly"`
		MountPropagation string `yaml:"mountPropagation"`
	}
	k8sVolume struct {
		Name     string
		HostPath *struct{ Path, Type string } `yaml:"hostPath"`
	}
)

// k8sObject reads docs/deploy/NAME, fails the test on anything k8sManifest finds wrong, and
// decodes its object of kind into obj.
func k8sObject(t *testing.T, name, kind string, obj any) {
	t.Helper()
	docs, bad := k8sManifest(deployFile(t, name))
	if len(bad) > 0 {
		t.Fatalf("%s:\n%s", name, strings.Join(bad, "\n"))
	}
	if docs[kind] == nil {
		t.Fatalf("%s has no %s", name, kind)
	}
	if err := docs[kind].Decode(obj); err != nil {
		t.Fatalf("%s: %s: %v", name, kind, err)
	}
}

// argv returns the container's command line: command, then args.
func (c *k8sContainer) argv() []string { return append(slices.Clip(c.Command), c.Args...) }

// privileged reports whether the container runs privileged.
func (c *k8sContainer) privileged() bool {
	return c.SecurityContext != nil && c.SecurityContext.Privileged
}

// findContainer returns the container called name in cs.
func findContainer(t *testing.T, cs []k8sContainer, name string) *k8sContainer {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %q", name)
	return nil
}

// mountOf returns the volume mount of c at path, and its volume.
func mountOf(t *testing.T, spec *k8sPodSpec, c *k8sContainer, path string) (k8sVolumeMount, k8sVolume) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			for _, v := range spec.Volumes {
				if v.Name == m.Name {
					return m, v
				}
			}
			t.Fatalf("container %s mounts volume %q, which the pod does not have", c.Name, m.Name)
		}
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return k8sVolumeMount{}, k8sVolume{}
}

// wantPropagation checks that container c mounts m with propagation want.
func wantPropagation(t *testing.T, c *k8sContainer, m k8sVolumeMount, want string) {
	t.Helper()
	if m.MountPropagation != want {
		got := m.MountPropagation
		if got == "" {
			got = "unset"
		}
		t.Errorf("container %s mounts %s with propagation %s, want %s", c.Name, m.MountPath, got, want)
	}
}

// wantHostPath checks that v is a hostPath volume of path and type typ.
func wantHostPath(t *testing.T, v k8sVolume, path, typ string) {
	t.Helper()
	if v.HostPath == nil || v.HostPath.Path != path || v.HostPath.Type != typ {
		t.Errorf("volume %s: %+v, want hostPath %s of type %s", v.Name, v.HostPath, path, typ)
	}
}

var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandK8s expands $(VAR) in s from env, as the kubelet does in a container's command.
func expandK8s(t *testing.T, s string, env []k8sEnvVar) string {
	t.Helper()
	return k8sVarRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		for _, e := range env {
			if e.Name == name && e.ValueFrom == nil {
				return e.Value
			}
		}
		t.Fatalf("%s: no such variable in the container's env", ref)
		return ""
	})
}

// TestDeployManifestFields: every field of docs/deploy/daemonset.yaml and trainer-pod.yaml is
// one the Kubernetes API has at that place, as deep as k8sKinds reaches (objects, pod specs,
// containers, volume mounts, volumes, probes, security contexts); so that the check is known to
// work, copies with a misspelt or misplaced field, a field given twice or a wrong apiVersion
// must be refused, naming what is wrong.
func TestDeployManifestFields(t *testing.T) {
	for _, name := range []string{"daemonset.yaml", "trainer-pod.yaml"} {
		if _, bad := k8sManifest(deployFile(t, name)); len(bad) > 0 {
			t.Errorf("%s:\n%s", name, strings.Join(bad, "\n"))
		}
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"daemonset.yaml", "hostPID: true", "hostPid: true", `spec.template.spec: unknown field "hostPid"`},
		{"daemonset.yaml", "readinessProbe:", "readynessProbe:", `containers[0]: unknown field "readynessProbe"`},
		{"daemonset.yaml", "mountPropagation: Bidirectional", "mountPropogation: Bidirectional", `initContainers[0].volumeMounts[0]: unknown field "mountPropogation"`},
		{"daemonset.yaml", "periodSeconds: 10", "periodSecond: 10", `readinessProbe: unknown field "periodSecond"`},
		{"daemonset.yaml", "    type: OnDelete", "    type: OnDelete\n    typ: RollingUpdate", `updateStrategy: unknown field "typ"`},
		{"daemonset.yaml", "type: CharDevice", "type: CharDevice\n          readOnly: true", `volumes[2]: unknown field "readOnly"`},
		{"daemonset.yaml", "  hostPID: true", "  hostPID: true\n      privileged: true", `spec.template.spec: unknown field "privileged"`},
		{"daemonset.yaml", "            privileged: true\n          volumeMounts", "            privileged: true\n            privileged: false\n          volumeMounts", `field "privileged" given twice`},
		{"daemonset.yaml", "apiVersion: apps/v1", "apiVersion: extensions/v1beta1", `apiVersion "extensions/v1beta1"`},
		{"trainer-pod.yaml", "readOnly: true", "readonly: true", `volumeMounts[0]: unknown field "readonly"`},
		{"trainer-pod.yaml", "  nodeSelector:", "  nodeSelecter:", `Pod.spec: unknown field "nodeSelecter"`},
	} {
		text := deployFile(t, tc.name)
		if !strings.Contains(text, tc.old) {
			t.Fatalf("%s has no %q", tc.name, tc.old)
		}
		_, bad := k8sManifest(strings.Replace(text, tc.old, tc.new, 1))
		if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, tc.want) }) {
			t.Errorf("%s with %q for %q: %q, want a complaint with %q", tc.name, tc.new, tc.old, bad, tc.want)
		}
	}
}

// TestDeployDaemonSet checks what aifs needs from docs/deploy/daemonset.yaml and
// trainer-pod.yaml (their fields checked as in TestDeployManifestFields): privileged, hostPID,
// a critical priority class admitted by the ResourceQuota, the mountpoint a directory inside a
// hostPath volume mounted Bidirectional (and the same hostPath in the trainer,
// HostToContainer), /dev/fuse, the node's cgroup tree read-only and the disk cache on
// hostPaths, credentials from a Secret, no memory limit. Then it runs the init container's
// command and the aifs command of the DaemonSet (its $(VAR)s expanded from the container's env,
// the Secret's keys pointing at a real S3 server, the container's paths moved to temporary
// directories), in the test's own pid namespace as hostPID puts it; the readiness probe and the
// trainer's wait command pass once the mount is live, the files read back, and the kubelet's
// SIGTERM unmounts, exit status 0.
func TestDeployDaemonSet(t *testing.T) {
	var ds struct {
		Metadata struct{ Namespace string }
		Spec     struct {
			UpdateStrategy struct{ Type string } `yaml:"updateStrategy"`
			Template       struct{ Spec k8sPodSpec }
		}
	}
	k8sObject(t, "daemonset.yaml", "DaemonSet", &ds)
	spec := &ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Errorf("hostPID is off: aifs would see pid 0 for every trainer (TestDeployNamespaces)")
	}
	if ds.Spec.UpdateStrategy.Type != "OnDelete" {
		t.Errorf("updateStrategy %q: a rolling update would unmount the data under running trainers", ds.Spec.UpdateStrategy.Type)
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q: want system-node-critical, so that the OOM killer takes a trainer first", spec.PriorityClassName)
	} else if ds.Metadata.Namespace != "kube-system" {
		// Outside kube-system the API server admits such pods only under a quota naming the class.
		var quota struct {
			Metadata struct{ Namespace string }
			Spec     struct {
				ScopeSelector struct {
					MatchExpressions []struct {
						ScopeName string `yaml:"scopeName"`
						Operator  string
						Values    []string
					} `yaml:"matchExpressions"`
				} `yaml:"scopeSelector"`
			}
		}
		k8sObject(t, "daemonset.yaml", "ResourceQuota", &quota)
		admits := false
		for _, e := range quota.Spec.ScopeSelector.MatchExpressions {
			admits = admits || e.ScopeName == "PriorityClass" && e.Operator == "In" && slices.Contains(e.Values, spec.PriorityClassName)
		}
		if !admits || quota.Metadata.Namespace != ds.Metadata.Namespace {
			t.Errorf("no ResourceQuota in namespace %q names priority class %s: the pods would not be admitted", ds.Metadata.Namespace, spec.PriorityClassName)
		}
	}
	c := findContainer(t, spec.Containers, "aifs")
	if !c.privileged() {
		t.Errorf("the aifs container is not privileged")
	}
	argv := c.argv()
	if len(argv) < 4 || argv[1] != "mount" || !slices.Contains(argv, "-f") {
		t.Fatalf("command %q: want aifs mount -f ... (the container's process 1 must stay)", argv)
	}
	if !strings.Contains(deployFile(t, "Dockerfile"), " "+argv[0]+"\n") {
		t.Errorf("the Dockerfile does not install aifs at %s", argv[0])
	}
	mnt := argv[len(argv)-1]
	vm, v := mountOf(t, spec, c, filepath.Dir(mnt))
	wantPropagation(t, c, vm, "Bidirectional")
	wantHostPath(t, v, vm.MountPath, "DirectoryOrCreate")
	hostMnt := v.HostPath.Path
	_, v = mountOf(t, spec, c, "/dev/fuse")
	wantHostPath(t, v, "/dev/fuse", "CharDevice")
	vm, v = mountOf(t, spec, c, "/sys/fs/cgroup")
	wantHostPath(t, v, "/sys/fs/cgroup", "Directory")
	if !vm.ReadOnly {
		t.Errorf("/sys/fs/cgroup is mounted writable")
	}
	var cacheDir string
	for _, a := range argv {
		if d, ok := strings.CutPrefix(a, "--cache-dir="); ok {
			cacheDir = d
		}
	}
	if cacheDir == "" {
		t.Fatalf("command %q has no --cache-dir=DIR", argv)
	}
	if _, v = mountOf(t, spec, c, filepath.Dir(cacheDir)); v.HostPath == nil {
		t.Errorf("the disk cache %s is not on a hostPath volume (the node's NVMe)", cacheDir)
	} else {
		wantHostPath(t, v, v.HostPath.Path, "DirectoryOrCreate")
	}
	if _, ok := c.Resources.Limits["memory"]; ok {
		t.Errorf("a memory limit on the aifs pod caps every trainer's page cache (docs/deploy.md)")
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil {
		t.Errorf("the aifs container's credentials do not come from a Secret: %+v", c.EnvFrom)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil || len(c.ReadinessProbe.Exec.Command) < 3 {
		t.Fatalf("the aifs container has no exec readiness probe")
	}
	init := findContainer(t, spec.InitContainers, "mountpoint")
	if !init.privileged() {
		t.Errorf("the init container is not privileged: its unmount must reach the node")
	}
	vm, _ = mountOf(t, spec, init, filepath.Dir(mnt))
	wantPropagation(t, init, vm, "Bidirectional")

	var pod struct{ Spec k8sPodSpec }
	k8sObject(t, "trainer-pod.yaml", "Pod", &pod)
	train := findContainer(t, pod.Spec.Containers, "train")
	wait := findContainer(t, pod.Spec.InitContainers, "wait-for-aifs")
	for _, tc := range []*k8sContainer{train, wait} {
		vm, v := mountOf(t, &pod.Spec, tc, filepath.Dir(mnt))
		wantPropagation(t, tc, vm, "HostToContainer")
		wantHostPath(t, v, hostMnt, "Directory")
	}
	if !slices.Contains(train.argv(), mnt) {
		t.Errorf("the trainer's command %q does not read %s", train.argv(), mnt)
	}

	// Run them: the container paths moved under a temporary root.
	srv, src, url := deploySet(t)
	root := t.TempDir()
	paths := strings.NewReplacer(filepath.Dir(mnt)+"/", root+"/mnt/", filepath.Dir(cacheDir)+"/", root+"/cache/")
	local := func(args []string) []string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = paths.Replace(expandK8s(t, a, c.Env))
		}
		return out
	}
	mkdir(t, root+"/mnt")
	hostMnt = root + "/mnt/" + filepath.Base(mnt)
	initArgv := local(init.argv())
	if b, err := exec.Command(initArgv[0], initArgv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("init container %q: %v\n%s", init.argv(), err, b)
	}
	args := local(argv[1:])
	for i, a := range args {
		if a == url {
			t.Fatalf("the command names the test's bucket already")
		}
		if strings.HasPrefix(a, "s3://") {
			args[i] = url
		}
		if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			if _, port, _ := net.SplitHostPort(v); port == "" {
				t.Fatalf("--metrics-addr=%s has no port", v)
			}
			args[i] = "--metrics-addr=" + freeAddr(t)
		}
	}
	cmd := exec.Command(aifsBin, args...)
	cmd.Env = append([]string{systemdPath}, srv.Env()...) // the Secret's keys
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	p := startDaemonProc(t, cmd)
	t.Cleanup(func() { unmount(t, hostMnt, 0) }) // before the kill and t.TempDir's removal, if the test fails
	probe := local(c.ReadinessProbe.Exec.Command)
	probe[0] = aifsBin
	deadline := time.Now().Add(time.Minute)
	for exec.Command(probe[0], probe[1:]...).Run() != nil {
		select {
		case <-p.done:
			t.Fatalf("aifs exited before the readiness probe %q passed\n%s", probe, clip(p.stderr.String()))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the readiness probe %q never passed\naifs: %s", probe, clip(p.stderr.String()))
		}
	}
	waitCmd := local(wait.argv())
	if b, err := exec.Command(waitCmd[0], waitCmd[1:]...).CombinedOutput(); err != nil {
		t.Errorf("the trainer's wait command %q: %v\n%s", waitCmd, err, b)
	}
	wantTree(t, "DaemonSet mount", src, hostMnt)
	p.stop(t, syscall.SIGTERM, hostMnt)
}

// TestDeployNamespaces shows why the DaemonSet has hostPID and why aifs must not be in a cgroup
// namespace of its own. A FUSE request carries the reader's pid as the daemon's pid namespace
// numbers it, 0 for a process outside it: aifs mounted in a pid namespace of its own (a
// container without hostPID) finds no reader's memory cgroup and takes every plan for one sender's.
// In a cgroup namespace of its own (a container on cgroup v2 that is not privileged, under
// containerd or Docker) aifs's cgroup reads as the root: with the host's cgroup tree at
// /sys/fs/cgroup (the DaemonSet's hostPath) that is the host's root, and aifs does not see its
// own memory limit; with its own cgroup mounted there, as a runtime mounts it, it does.
func TestDeployNamespaces(t *testing.T) {
	src := t.TempDir()
	var plan strings.Builder
	plan.WriteString("aifs-plan 1 paths\n")
	for i := range 40 {
		rel := fmt.Sprintf("d/s%02d.bin", i)
		writeFile(t, filepath.Join(src, rel), randomBytes(uint64(700+i), 50000))
		plan.WriteString(rel + "\n")
	}
	set := filepath.Join(t.TempDir(), "set")
	mustAifs(t, "pack", "--quiet", src, set)

	// mountIn mounts set in the foreground under wrap (nil: directly), in cgroup cg if not "",
	// and returns the mountpoint and a function that reads the mount's stats in aifs's mount
	// namespace (where wrap gives it one of its own, nobody else sees the mount).
	mountIn := func(t *testing.T, cg string, wrap ...string) (string, func() aifsfs.Snapshot) {
		mnt := filepath.Join(t.TempDir(), "mnt")
		mkdir(t, mnt)
		argv := append(append([]string{"sh", "-c", `[ -z "$0" ] || echo $$ >"$0/cgroup.procs"; exec "$@"`, cg}, wrap...), aifsBin, "mount", "-f", set, mnt)
		p := startDaemonProc(t, exec.Command(argv[0], argv[1:]...))
		t.Cleanup(func() { unmount(t, mnt, 0) })
		read := func() (st aifsfs.Snapshot, err error) { // sh, unshare and the wrap exec aifs: its pid is p's
			nsenter := exec.Command("nsenter", "--target", strconv.Itoa(p.cmd.Process.Pid), "--mount", "cat", filepath.Join(mnt, ".aifs", "stats"))
			b, err := nsenter.Output()
			if err == nil {
				err = json.Unmarshal(b, &st)
			}
			return st, err
		}
		stats := func() aifsfs.Snapshot {
			st, err := read()
			if err != nil {
				t.Fatalf("the stats of %s in aifs's mount namespace: %v", mnt, err)
			}
			return st
		}
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := read(); err == nil {
				return mnt, stats
			}
			if time.Now().After(end) {
				t.Fatalf("%q: no mount after 30 s\n%s", argv, clip(p.stderr.String()))
			}
		}
	}

	t.Run("pid", func(t *testing.T) {
		cg := memoryCgroup(t, 512<<20) // below MemAvailable: the reader's limit is the budget
		for _, tc := range []struct {
			name string
			wrap []string
			sees bool
		}{{"hostPID", nil, true}, {"own pid namespace", []string{"unshare", "--pid", "--fork", "--kill-child"}, false}} {
			mnt, stats := mountIn(t, "", tc.wrap...)
			planCmd := exec.Command(aifsBin, "plan", mnt)
			planCmd.Stdin = strings.NewReader(plan.String())
			if b, err := planCmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: aifs plan: %v\n%s", tc.name, err, b)
			}
			// A reader in cg that stays alive: aifs reads /proc/PID/cgroup of recent readers once a second.
			reader := exec.Command("sh", "-c", `echo $$ >"$0/cgroup.procs" && exec /usr/bin/python3 -c "$1" "$2"`, cg,
				"import os, sys, time\nfor d, _, fs in os.walk(sys.argv[1]):\n  for f in fs: open(os.path.join(d, f), 'rb').read()\nprint('read', flush=True)\ntime.sleep(30)",
				filepath.Join(mnt, "d"))
			stdout, err := reader.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := reader.Start(); err != nil {
				t.Fatal(err)
			}
			if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "read\n" {
				reader.Process.Kill()
				reader.Wait()
				t.Fatalf("%s: the reader did not read the files (%q)", tc.name, line)
			}
			var st = stats()
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if st = stats(); strings.Contains(st.PageCache.Source, filepath.Base(cg)) {
					break
				}
			}
			reader.Process.Kill()
			reader.Wait()
			if got := strings.Contains(st.PageCache.Source, filepath.Base(cg)); got != tc.sees {
				t.Errorf("%s: page_cache budget from %q: names the reader's cgroup %v, want %v", tc.name, st.PageCache.Source, got, tc.sees)
			}
			if len(st.Plans) != 1 || (st.Plans[0].Writer != 0) != tc.sees {
				t.Errorf("%s: plans %+v: want one, from a pid other than 0: %v", tc.name, st.Plans, tc.sees)
			}
		}
	})

	t.Run("cgroup", func(t *testing.T) {
		const limit = 256 << 20              // mem_cache is then 1/8 of it
		hierarchy := "/sys/fs/cgroup/memory" // where memoryCgroup makes cg
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			hierarchy = "/sys/fs/cgroup"
		}
		for _, tc := range []struct {
			name    string
			ns      []string // unshare's
			ownTree bool     // cg mounted at hierarchy in aifs's mount namespace, as a runtime does for a container with a cgroup namespace of its own
			sees    bool
		}{
			{"host cgroup namespace", nil, false, true},
			{"own cgroup namespace, the host's tree", []string{"--cgroup"}, false, false},
			{"own cgroup namespace, its own tree", []string{"--cgroup", "--mount"}, true, true},
		} {
			cg := memoryCgroup(t, limit)
			var wrap []string
			if tc.ns != nil {
				wrap = append([]string{"unshare"}, tc.ns...)
			}
			if tc.ownTree {
				wrap = append(wrap, "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, cg, hierarchy)
			}
			_, stats := mountIn(t, cg, wrap...)
			st := stats()
			if got := st.Cache.BudgetBytes == limit/8; got != tc.sees {
				t.Errorf("%s: mem_cache %d in a cgroup of %d: sees the limit %v, want %v", tc.name, st.Cache.BudgetBytes, limit, got, tc.sees)
			}
		}
	})
}

// TestDeployDockerfile checks what can be checked of docs/deploy/Dockerfile without building an
// image: its Go image is new enough for go.mod, its go build line builds a static aifs (the
// runtime image has no Go and no C library of the build image), and the runtime image gets
// fuse3 and CA certificates.
func TestDeployDockerfile(t *testing.T) {
	df := deployFile(t, "Dockerfile")
	m := regexp.MustCompile(`(?m)^FROM golang:(\d+)\.(\d+)\S* AS build$`).FindStringSubmatch(df)
	if m == nil {
		t.Fatalf("the Dockerfile has no FROM golang:X.Y AS build")
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	gm := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	if gm == nil {
		t.Fatalf("go.mod has no go line")
	}
	major, minor := func(s string) int { n, _ := strconv.Atoi(s); return n }(m[1]), func(s string) int { n, _ := strconv.Atoi(s); return n }(m[2])
	gmMajor, gmMinor := func(b []byte) int { n, _ := strconv.Atoi(string(b)); return n }(gm[1]), func(b []byte) int { n, _ := strconv.Atoi(string(b)); return n }(gm[2])
	if major < gmMajor || major == gmMajor && minor < gmMinor {
		t.Errorf("the build image has Go %s.%s; go.mod needs %s.%s", m[1], m[2], gm[1], gm[2])
	}
	build := regexp.MustCompile(`(?m)^RUN (.*go build .* -o /out/aifs \./cmd/aifs)$`).FindStringSubmatch(df)
	if build == nil {
		t.Fatalf("the Dockerfile has no RUN ... go build ... -o /out/aifs ./cmd/aifs")
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "-c", strings.Replace(build[1], "/out/aifs", out+"/aifs", 1))
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build[1], err, b)
	}
	f, err := elf.Open(out + "/aifs")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the Dockerfile's aifs is dynamically linked: it needs the build image's C library")
		}
	}
	for _, want := range []string{"fuse3", "ca-certificates", "COPY --from=build /out/aifs /usr/local/bin/aifs"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
}
