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
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The deployment artefacts of docs/deploy/ (docs/deploy.md), checked as far as this machine
// can: the systemd unit by systemd-analyze verify and by running its commands as systemd would
// (there is no systemd here to start it), the fstab line by systemd's fstab generator and by
// mount(8), the Kubernetes manifests by decoding them strictly into the Kubernetes API types and
// running the aifs command of the DaemonSet, the Dockerfile by running its go build line, and
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
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.mnt, &st); !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.EIO) {
		t.Fatalf("after kill -9: statfs %s: %v, want ENOTCONN, ECONNABORTED or EIO (a dead mount)", r.mnt, err)
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

// decodeStrict decodes each YAML document of text into the Kubernetes type its kind names,
// refusing any field the type does not have (a misspelt or misplaced field fails here, where
// kubectl would drop it or the API server refuse it).
func decodeStrict(t *testing.T, name, text string) []any {
	t.Helper()
	dec := yaml.NewDecoder(strings.NewReader(text))
	var objs []any
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc == nil {
			continue
		}
		var obj any
		switch kind := doc["kind"]; kind {
		case "DaemonSet":
			obj = &appsv1.DaemonSet{}
		case "Pod":
			obj = &corev1.Pod{}
		case "ResourceQuota":
			obj = &corev1.ResourceQuota{}
		default:
			t.Fatalf("%s: kind %v is not checked here", name, kind)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jd := json.NewDecoder(bytes.NewReader(b))
		jd.DisallowUnknownFields()
		if err := jd.Decode(obj); err != nil {
			t.Fatalf("%s: %s: %v", name, doc["kind"], err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// findContainer returns the container called name in cs.
func findContainer(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
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
func mountOf(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, path string) (corev1.VolumeMount, corev1.Volume) {
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
	return corev1.VolumeMount{}, corev1.Volume{}
}

// propagation names m's mount propagation ("unset" for none).
func propagation(m corev1.VolumeMount) string {
	if m.MountPropagation == nil {
		return "unset"
	}
	return string(*m.MountPropagation)
}

// wantHostPath checks that v is a hostPath volume of path and type typ.
func wantHostPath(t *testing.T, v corev1.Volume, path string, typ corev1.HostPathType) {
	t.Helper()
	if v.HostPath == nil || v.HostPath.Path != path || v.HostPath.Type == nil || *v.HostPath.Type != typ {
		t.Errorf("volume %s: %+v, want hostPath %s of type %s", v.Name, v.HostPath, path, typ)
	}
}

var k8sVarRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expandK8s expands $(VAR) in s from env, as the kubelet does in a container's command.
func expandK8s(t *testing.T, s string, env []corev1.EnvVar) string {
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

// TestDeployDaemonSet decodes docs/deploy/daemonset.yaml and trainer-pod.yaml strictly into the
// Kubernetes API types and checks what aifs needs from them: privileged, hostPID, the
// mountpoint a directory inside a hostPath volume mounted Bidirectional (and the same
// hostPath in the trainer, HostToContainer), /dev/fuse, the node's cgroup tree and the disk
// cache on hostPaths, credentials from a Secret. Then it runs the init container's command and
// the aifs command of the DaemonSet (its $(VAR)s expanded from the container's env, the
// Secret's keys pointing at a real S3 server, the container's paths moved to temporary
// directories), in the test's own pid namespace as hostPID puts it; the readiness probe and the
// trainer's wait command pass once the mount is live, the files read back, and the kubelet's
// SIGTERM unmounts, exit status 0.
func TestDeployDaemonSet(t *testing.T) {
	var ds *appsv1.DaemonSet
	for _, o := range decodeStrict(t, "daemonset.yaml", deployFile(t, "daemonset.yaml")) {
		if d, ok := o.(*appsv1.DaemonSet); ok {
			ds = d
		}
	}
	if ds == nil {
		t.Fatalf("daemonset.yaml has no DaemonSet")
	}
	spec := &ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Errorf("hostPID is off: aifs would see pid 0 for every trainer (TestDeployNamespaces)")
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		t.Errorf("updateStrategy %q: a rolling update would unmount the data under running trainers", ds.Spec.UpdateStrategy.Type)
	}
	c := findContainer(t, spec.Containers, "aifs")
	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Errorf("the aifs container is not privileged")
	}
	if len(c.Command) < 4 || c.Command[1] != "mount" || !slices.Contains(c.Command, "-f") {
		t.Fatalf("command %q: want aifs mount -f ... (the container's process 1 must stay)", c.Command)
	}
	if !strings.Contains(deployFile(t, "Dockerfile"), " "+c.Command[0]+"\n") {
		t.Errorf("the Dockerfile does not install aifs at %s", c.Command[0])
	}
	mnt := c.Command[len(c.Command)-1]
	vm, v := mountOf(t, spec, c, filepath.Dir(mnt))
	if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("%s is mounted with propagation %s, want Bidirectional", vm.MountPath, propagation(vm))
	}
	wantHostPath(t, v, vm.MountPath, corev1.HostPathDirectoryOrCreate)
	hostMnt := v.HostPath.Path
	_, v = mountOf(t, spec, c, "/dev/fuse")
	wantHostPath(t, v, "/dev/fuse", corev1.HostPathCharDev)
	vm, v = mountOf(t, spec, c, "/sys/fs/cgroup")
	wantHostPath(t, v, "/sys/fs/cgroup", corev1.HostPathDirectory)
	if !vm.ReadOnly {
		t.Errorf("/sys/fs/cgroup is mounted writable")
	}
	var cacheDir string
	for _, a := range c.Command {
		if d, ok := strings.CutPrefix(a, "--cache-dir="); ok {
			cacheDir = d
		}
	}
	if cacheDir == "" {
		t.Fatalf("command %q has no --cache-dir=DIR", c.Command)
	}
	if _, v = mountOf(t, spec, c, filepath.Dir(cacheDir)); v.HostPath == nil {
		t.Errorf("the disk cache %s is not on a hostPath volume (the node's NVMe)", cacheDir)
	} else {
		wantHostPath(t, v, v.HostPath.Path, corev1.HostPathDirectoryOrCreate)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		t.Errorf("a memory limit on the aifs pod caps every trainer's page cache (docs/deploy.md)")
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil {
		t.Errorf("the aifs container's credentials do not come from a Secret: %+v", c.EnvFrom)
	}
	init := findContainer(t, spec.InitContainers, "mountpoint")
	if sc := init.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Errorf("the init container is not privileged: its unmount must reach the node")
	}
	if vm, _ := mountOf(t, spec, init, filepath.Dir(mnt)); vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("the init container mounts %s with propagation %s, want Bidirectional", vm.MountPath, propagation(vm))
	}

	var pod *corev1.Pod
	for _, o := range decodeStrict(t, "trainer-pod.yaml", deployFile(t, "trainer-pod.yaml")) {
		pod, _ = o.(*corev1.Pod)
	}
	if pod == nil {
		t.Fatalf("trainer-pod.yaml has no Pod")
	}
	train := findContainer(t, pod.Spec.Containers, "train")
	wait := findContainer(t, pod.Spec.InitContainers, "wait-for-aifs")
	for _, tc := range []*corev1.Container{train, wait} {
		vm, v := mountOf(t, &pod.Spec, tc, filepath.Dir(mnt))
		if vm.MountPropagation == nil || *vm.MountPropagation != corev1.MountPropagationHostToContainer {
			t.Errorf("trainer container %s mounts %s with propagation %s, want HostToContainer", tc.Name, vm.MountPath, propagation(vm))
		}
		wantHostPath(t, v, hostMnt, corev1.HostPathDirectory)
	}
	if !slices.Contains(train.Command, mnt) {
		t.Errorf("the trainer's command %q does not read %s", train.Command, mnt)
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
	if b, err := exec.Command(init.Command[0], local(init.Command[1:])...).CombinedOutput(); err != nil {
		t.Fatalf("init container %q: %v\n%s", init.Command, err, b)
	}
	args := local(c.Command[1:])
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
	waitCmd := local(wait.Command)
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
// containerd or Docker) aifs's cgroup reads as the root, so it does not see its own memory limit.
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

	// mountIn mounts set in the foreground under wrap (nil: directly), in cgroup cg if not "".
	mountIn := func(t *testing.T, cg string, wrap ...string) string {
		mnt := filepath.Join(t.TempDir(), "mnt")
		mkdir(t, mnt)
		argv := append(append([]string{"sh", "-c", `[ -z "$0" ] || echo $$ >"$0/cgroup.procs"; exec "$@"`, cg}, wrap...), aifsBin, "mount", "-f", set, mnt)
		p := startDaemonProc(t, exec.Command(argv[0], argv[1:]...))
		t.Cleanup(func() { unmount(t, mnt, 0) })
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(mnt, ".aifs", "stats")); err == nil {
				return mnt
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
			mnt := mountIn(t, "", tc.wrap...)
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
			var st = readStats(t, mnt)
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if st = readStats(t, mnt); strings.Contains(st.PageCache.Source, filepath.Base(cg)) {
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
		const limit = 256 << 20 // mem_cache is then 1/8 of it
		for _, tc := range []struct {
			name string
			wrap []string
			sees bool
		}{{"host cgroup namespace", nil, true}, {"own cgroup namespace", []string{"unshare", "--cgroup"}, false}} {
			cg := memoryCgroup(t, limit)
			st := readStats(t, mountIn(t, cg, tc.wrap...))
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
