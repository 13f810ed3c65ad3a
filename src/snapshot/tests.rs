use super::*;

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        assert!(Command::new("git").args(args).current_dir(dir.path()).status().unwrap().success());
    };
    run(&["init", "-q"]);
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    std::fs::write(dir.path().join(".gitignore"), "build/\n").unwrap();
    run(&["add", "."]);
    run(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]);
    dir
}

#[test]
fn tree_changes_with_uncommitted_and_untracked_files_only() {
    let ws = repo();
    let t0 = tree_hash(ws.path()).unwrap();
    assert_eq!(t0, tree_hash(ws.path()).unwrap(), "same tree, same hash");
    std::fs::create_dir(ws.path().join("build")).unwrap();
    std::fs::write(ws.path().join("build/out.o"), "x").unwrap();
    assert_eq!(t0, tree_hash(ws.path()).unwrap(), "ignored files do not count");
    std::fs::write(ws.path().join("a.txt"), "two\n").unwrap();
    let t1 = tree_hash(ws.path()).unwrap();
    assert_ne!(t0, t1);
    std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
    let t2 = tree_hash(ws.path()).unwrap();
    assert_ne!(t1, t2);
    // A persistent index gives the same trees and follows every change.
    let idx = tempfile::tempdir().unwrap();
    let index = idx.path().join("index");
    let store = idx.path().join("store.git");
    assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2);
    std::fs::remove_file(ws.path().join("new.c")).unwrap();
    assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t1);
    std::fs::write(ws.path().join("new.c"), "int x;\n").unwrap();
    assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2);
    std::fs::write(&index, "garbage").unwrap();
    assert_eq!(tree_hash_with_index(&store, ws.path(), &index).unwrap(), t2, "a damaged index is rebuilt");
    // An index left by another store (an older gadfly's, kept in the
    // workspace's repository) is not trusted by a new store.
    let store2 = idx.path().join("store2.git");
    assert_eq!(tree_hash_with_index(&store2, ws.path(), &index).unwrap(), t2);
    export(&store2, &t2, tempfile::tempdir().unwrap().path()).unwrap();
    // the workspace's own index is untouched
    let status = Command::new("git").args(["diff", "--cached", "--name-only"]).current_dir(ws.path()).output().unwrap();
    assert!(status.stdout.is_empty());
    let dest = tempfile::tempdir().unwrap();
    export(&store, &t2, dest.path()).unwrap();
    assert_eq!(std::fs::read_to_string(dest.path().join("a.txt")).unwrap(), "two\n");
    assert!(dest.path().join("new.c").exists());
    assert!(!dest.path().join("build").exists());
    // The same tree as a tar, unpacked elsewhere (what a worker does).
    let tar = archive(&store, &t2).unwrap();
    let other = tempfile::tempdir().unwrap();
    unpack(&tar, other.path()).unwrap();
    assert_eq!(std::fs::read_to_string(other.path().join("a.txt")).unwrap(), "two\n");
    assert!(other.path().join("new.c").exists());
    assert!(unpack(b"not a tar", other.path()).is_err());
}

#[test]
fn fingerprint_follows_content_not_times() {
    let ws = repo();
    let f0 = fingerprint(ws.path(), &[]).unwrap();
    assert_eq!(f0, fingerprint(ws.path(), &[]).unwrap());
    std::fs::create_dir(ws.path().join("build")).unwrap();
    std::fs::write(ws.path().join("build/out.o"), "x").unwrap();
    assert_eq!(f0, fingerprint(ws.path(), &[]).unwrap(), "ignored files do not count");
    // The agent's move against a stat fingerprint: same size, the old
    // modification time put back, the file rewritten in place.
    let a = ws.path().join("a.txt");
    let md = std::fs::metadata(&a).unwrap();
    std::fs::write(&a, "ONE\n").unwrap();
    std::fs::File::options().write(true).open(&a).unwrap().set_modified(md.modified().unwrap()).unwrap();
    assert_eq!(std::fs::metadata(&a).unwrap().len(), md.len());
    let f1 = fingerprint(ws.path(), &[]).unwrap();
    assert_ne!(f0, f1, "same size and time, other bytes");
    std::fs::write(ws.path().join(".hidden"), "x").unwrap();
    assert_ne!(f1, fingerprint(ws.path(), &[]).unwrap(), "hidden files count");
    // With candidate globs, only the candidate's files count.
    let k = fingerprint(ws.path(), &["kernel/**".to_string()]).unwrap();
    std::fs::write(ws.path().join("notes.md"), "elsewhere").unwrap();
    assert_eq!(k, fingerprint(ws.path(), &["kernel/**".to_string()]).unwrap());
    std::fs::create_dir_all(ws.path().join("kernel")).unwrap();
    std::fs::write(ws.path().join("kernel/k.c"), "int k;").unwrap();
    assert_ne!(k, fingerprint(ws.path(), &["kernel/**".to_string()]).unwrap());
}

/// What is exported is byte for byte what the workspace holds, whatever its
/// `.gitattributes` ask: no line-ending conversion, no `$Id$`, no encoding
/// change, no file dropped or rewritten by `git archive`.
#[test]
fn the_exported_bytes_are_the_workspace_bytes_whatever_its_attributes_say() {
    let ws = repo();
    std::fs::write(
        ws.path().join(".gitattributes"),
        "*.c text eol=crlf ident\n*.h working-tree-encoding=UTF-16\nhidden.c export-ignore\nsubst.c export-subst\n",
    )
    .unwrap();
    let files: &[(&str, &[u8])] = &[
        ("k.c", b"int a;\r\n/* $Id$ */\nint b;\n"),
        ("k.h", b"\xff\xfei\x00n\x00t\x00"),
        ("hidden.c", b"int hidden;\n"),
        ("subst.c", b"/* $Format:%H$ */\n"),
    ];
    for (name, bytes) in files {
        std::fs::write(ws.path().join(name), bytes).unwrap();
    }
    let store = tempfile::tempdir().unwrap();
    let repo = store.path().join("s.git");
    let tree = tree_hash_with_index(&repo, ws.path(), &store.path().join("index")).unwrap();
    let out = tempfile::tempdir().unwrap();
    export(&repo, &tree, out.path()).unwrap();
    for (name, bytes) in files {
        assert_eq!(&std::fs::read(out.path().join(name)).unwrap(), bytes, "{name}");
    }
}

#[test]
fn protected_changes_are_named() {
    let ws = repo();
    std::fs::create_dir(ws.path().join("harness")).unwrap();
    std::fs::write(ws.path().join("harness/h.sh"), "echo\n").unwrap();
    let globs = vec!["harness/**".to_string()];
    let before = hash_protected_in_tree(ws.path(), &globs).unwrap();
    assert_eq!(before.len(), 1);
    std::fs::write(ws.path().join("harness/h.sh"), "echo cheat\n").unwrap();
    std::fs::write(ws.path().join("harness/extra.sh"), "x\n").unwrap();
    let after = hash_protected_in_tree(ws.path(), &globs).unwrap();
    let v = protected_violations(&before, &after);
    assert_eq!(v, vec!["protected file harness/h.sh was modified", "protected path harness/extra.sh was added"]);
}

fn git_in(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn loose_objects(ws: &Path) -> usize {
    walkdir::WalkDir::new(ws.join(".git/objects"))
        .into_iter()
        .filter(|e| e.as_ref().unwrap().file_type().is_file())
        .count()
}

#[test]
fn a_hostile_git_dir_is_never_honoured() {
    let ws = repo();
    let marker = ws.path().join("..").join(format!("ran-{}", rand::random::<u64>()));
    let hook = ws.path().join(".git/hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\necho \"$0 $*\" >> {}\ncat\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A replace ref that would make the exported a.txt another blob.
    let honest = git_in(ws.path(), &["rev-parse", "HEAD:a.txt"]);
    std::fs::write(ws.path().join("forged"), "forged\n").unwrap();
    let forged = git_in(ws.path(), &["hash-object", "-w", "forged"]);
    std::fs::remove_file(ws.path().join("forged")).unwrap();
    git_in(ws.path(), &["replace", &honest, &forged]);
    let h = hook.display().to_string();
    git_in(ws.path(), &["config", "core.fsmonitor", &h]);
    git_in(ws.path(), &["config", "filter.x.clean", &h]);
    git_in(ws.path(), &["config", "filter.x.required", "true"]);
    std::fs::write(ws.path().join(".git/info/attributes"), "* filter=x\n").unwrap();
    std::fs::write(ws.path().join(".gitattributes"), "*.txt filter=x\n").unwrap();
    let before = loose_objects(ws.path());

    let dir = tempfile::tempdir().unwrap();
    let store = store_path(dir.path(), "c1");
    std::fs::create_dir_all(dir.path().join("indexes")).unwrap();
    let index = dir.path().join("indexes/c1.index");
    let t = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    std::fs::write(ws.path().join("new.txt"), "new\n").unwrap();
    let t2 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    assert_ne!(t, t2);
    let dest = tempfile::tempdir().unwrap();
    export(&store, &t2, dest.path()).unwrap();
    let tar = archive(&store, &t2).unwrap();
    assert!(!marker.exists(), "the workspace's git config ran: {}", std::fs::read_to_string(&marker).unwrap());
    assert_eq!(std::fs::read_to_string(dest.path().join("a.txt")).unwrap(), "one\n", "the replace ref was honoured");
    let other = tempfile::tempdir().unwrap();
    unpack(&tar, other.path()).unwrap();
    assert_eq!(std::fs::read_to_string(other.path().join("a.txt")).unwrap(), "one\n");
    // Nothing was written into the workspace's repository, and the
    // tree is the same as a plain hash of the same files.
    assert_eq!(loose_objects(ws.path()), before);
    assert!(dir.path().join("snapshots/c1.git/HEAD").is_file());
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(plain.path().join("a.txt"), "one\n").unwrap();
    std::fs::write(plain.path().join("new.txt"), "new\n").unwrap();
    std::fs::write(plain.path().join(".gitignore"), "build/\n").unwrap();
    std::fs::write(plain.path().join(".gitattributes"), "*.txt filter=x\n").unwrap();
    assert_eq!(tree_hash(plain.path()).unwrap(), t2);
    // Importing a commit's tree (the beam) reads the workspace's objects
    // without its replace refs and re-hashes them.
    let head_tree = git_in(ws.path(), &["rev-parse", "HEAD^{tree}"]);
    let imported = import_tree(&store, ws.path(), &head_tree).unwrap();
    let d3 = tempfile::tempdir().unwrap();
    export(&store, &imported, d3.path()).unwrap();
    assert_eq!(std::fs::read_to_string(d3.path().join("a.txt")).unwrap(), "one\n");
    assert!(!marker.exists());
    // The scrubbed environment wins over the daemon's own GIT_* variables.
    assert!(scrubbed_git(&store).get_envs().any(|(k, v)| k == "GIT_NO_REPLACE_OBJECTS" && v.is_some()));
}

#[test]
fn a_candidate_tree_holds_only_the_candidate() {
    let ws = repo();
    std::fs::create_dir_all(ws.path().join("kernel")).unwrap();
    std::fs::create_dir_all(ws.path().join("tools")).unwrap();
    std::fs::write(ws.path().join("kernel/qr.c"), "int qr;\n").unwrap();
    std::fs::write(ws.path().join("GNUmakefile"), "forged: all\n").unwrap();
    std::fs::write(ws.path().join("tools/wrap.sh"), "exit 0\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, index) = (dir.path().join("s.git"), dir.path().join("i"));
    let globs = vec!["kernel/**".to_string()];
    let full = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    let cand = candidate_tree(&store, &full, &globs).unwrap();
    let paths: Vec<String> = tree_entries(&store, &cand).unwrap().into_iter().map(|e| e.path).collect();
    assert_eq!(paths, vec!["kernel/qr.c"]);
    assert!(candidate_problems(&store, &cand).unwrap().is_empty());
    // Edits outside the candidate leave its tree as it was.
    std::fs::write(ws.path().join("tools/wrap.sh"), "exit 1\n").unwrap();
    let full2 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    assert_ne!(full, full2);
    assert_eq!(candidate_tree(&store, &full2, &globs).unwrap(), cand);
    std::fs::write(ws.path().join("kernel/qr.c"), "int qr2;\n").unwrap();
    let full3 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    assert_ne!(candidate_tree(&store, &full3, &globs).unwrap(), cand);
    // A name that is code for a shell, a link, are refused by name.
    std::fs::write(ws.path().join("kernel/a`sh${IFS}t.sh`.c"), "").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.path().join("kernel/l.c")).unwrap();
    let full4 = tree_hash_with_index(&store, ws.path(), &index).unwrap();
    let bad = candidate_tree(&store, &full4, &globs).unwrap();
    let problems = candidate_problems(&store, &bad).unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("kernel/a`sh${IFS}t.sh`.c") && problems[0].contains("refused"), "{problems:?}");
    assert!(problems[1].contains("kernel/l.c") && problems[1].contains("symbolic link"), "{problems:?}");
    // An empty candidate is an empty tree, not an error.
    let none = candidate_tree(&store, &full4, &["nothing/**".to_string()]).unwrap();
    assert!(tree_entries(&store, &none).unwrap().is_empty());
}

#[test]
fn safe_candidate_paths() {
    for ok in ["kernel/qr.c", "kernel/sub/a_b-c+d.cu", ".clang-format", "k/.x"] {
        assert!(safe_candidate_path(ok), "{ok}");
    }
    for bad in [
        "kernel/a`sh${IFS}t.sh`.c",
        "kernel/a b.c",
        "kernel/-o.c",
        "kernel/../x",
        "kernel//x",
        "kernel/a'b.c",
        "kernel/a\"b.c",
        "kernel/$x.c",
        "kernel/a;b.c",
        "kernel/a=b.c",
        "kernel/a*.c",
        "kernel/\u{e9}.c",
        "kernel/a\nb.c",
        "",
    ] {
        assert!(!safe_candidate_path(bad), "{bad:?}");
    }
}

#[test]
fn restore_never_follows_a_link() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("cpu")).unwrap();
    std::fs::write(outside.path().join("cpu/harness.h"), "agent's\n").unwrap();
    std::fs::write(outside.path().join("victim"), "untouched\n").unwrap();
    // A protected folder that is a link, and a protected file that is a
    // link inside a real folder.
    std::os::unix::fs::symlink(outside.path(), root.path().join("harness")).unwrap();
    std::fs::create_dir_all(root.path().join("ref")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("victim"), root.path().join("ref/expected.txt")).unwrap();
    let file = |path: &str, content: &str| PristineFile {
        path: path.into(),
        sha256: hex::encode(Sha256::digest(content.as_bytes())),
        mode: 0o644,
        content: content.as_bytes().to_vec(),
    };
    let files = vec![file("harness/cpu/harness.h", "pristine\n"), file("ref/expected.txt", "expected\n")];
    let globs = vec!["harness/**".to_string(), "ref/**".to_string()];
    restore_pristine(root.path(), &globs, &files).unwrap();
    assert_eq!(std::fs::read_to_string(outside.path().join("cpu/harness.h")).unwrap(), "agent's\n");
    assert_eq!(std::fs::read_to_string(outside.path().join("victim")).unwrap(), "untouched\n");
    assert!(root.path().join("harness").symlink_metadata().unwrap().is_dir());
    assert_eq!(std::fs::read_to_string(root.path().join("harness/cpu/harness.h")).unwrap(), "pristine\n");
    assert!(root.path().join("ref/expected.txt").symlink_metadata().unwrap().is_file());
    assert_eq!(std::fs::read_to_string(root.path().join("ref/expected.txt")).unwrap(), "expected\n");
    // Hashing does not follow a linked folder either.
    let linked = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), linked.path().join("harness")).unwrap();
    let h = hash_matching(linked.path(), &globs).unwrap();
    assert!(!h.keys().any(|k| k.starts_with("harness/")), "{h:?}");
    assert!(real_parents(root.path(), "../x").is_err());
}

/// The bytes on disk, whatever the stat says: a same-size rewrite whose old
/// modification time is put back, in the same second as the snapshot
/// before it (git compares change times to the second), is a new tree.
/// Before, the persistent index trusted the stat and gave the old tree.
#[test]
fn a_forged_stat_does_not_hide_a_rewrite_from_the_persistent_index() {
    let ws = repo();
    let idx = tempfile::tempdir().unwrap();
    let (index, store) = (idx.path().join("index"), idx.path().join("store.git"));
    let file = ws.path().join("a.txt");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for round in 0..5 {
        std::fs::write(&file, "aaaa\n").unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
        let before = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        std::fs::write(&file, "bbbb\n").unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(old).unwrap();
        let after = tree_hash_with_index(&store, ws.path(), &index).unwrap();
        assert_ne!(before, after, "round {round}: the rewrite was hidden by its forged stat");
        assert_eq!(after, tree_hash(ws.path()).unwrap(), "the tree of the bytes on disk");
    }
}
