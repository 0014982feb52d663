// FUSE drivers: how each is told what to mount, where, and as whom. Credentials go into
// the driver's environment (readable only by its own user through /proc), never argv.
#include "dockgate/mount/mount.hpp"

namespace dockgate::mount {

namespace {

std::vector<std::string> base_environment(const mount_config& c) {
  // A clean environment: nothing of the caller's leaks in (AWS_CA_BUNDLE, proxies, ...).
  std::vector<std::string> env{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                               "HOME=/root",
                               "AWS_ACCESS_KEY_ID=" + c.access_key,
                               "AWS_SECRET_ACCESS_KEY=" + c.secret_key,
                               "AWSACCESSKEYID=" + c.access_key,
                               "AWSSECRETACCESSKEY=" + c.secret_key,
                               "AIMEM_BUCKET=" + c.bucket,
                               "AIMEM_ENDPOINT=" + c.endpoint,
                               "AIMEM_ACCESS_KEY=" + c.access_key,
                               "AIMEM_SECRET_KEY=" + c.secret_key};
  if (!c.session_token.empty()) {
    env.push_back("AWS_SESSION_TOKEN=" + c.session_token);
    env.push_back("AWSSESSIONTOKEN=" + c.session_token);
    env.push_back("AIMEM_SESSION_TOKEN=" + c.session_token);
  }
  return env;
}

void replace_all(std::string& s, std::string_view what, std::string_view with) {
  for (auto pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + with.size()))
    s.replace(pos, what.size(), with);
}

}  // namespace

std::optional<driver_command> driver_for(const mount_config& c, std::string_view key,
                                         const std::string& mountpoint, const std::string& log_file,
                                         std::string& error) {
  const std::string full_key =
      c.prefix.empty() ? std::string(key) : c.prefix + "/" + std::string(key);
  const std::string uid = std::to_string(c.uid), gid = std::to_string(c.gid);
  driver_command d;
  d.env = base_environment(c);
  if (c.driver == "s3fs") {
    // Debian's s3fs: path-style (MinIO, AIStor, Ceph), SigV4 for the region, files owned
    // by the sandbox user, other users (the engine, the sandbox) allowed in. In the
    // foreground (-f): dockgate-mount sees it die at once, instead of a daemon that exits 0.
    d.argv = {"s3fs",     c.bucket + ":/" + full_key,
              mountpoint, "-f",
              "-o",       "url=" + c.endpoint,
              "-o",       "use_path_request_style",
              "-o",       "endpoint=" + c.region,
              "-o",       "allow_other",
              "-o",       "nosuid",
              "-o",       "nodev",
              "-o",       "uid=" + uid,
              "-o",       "gid=" + gid,
              "-o",       "umask=0022",
              "-o",       "mp_umask=0022",
              "-o",       "logfile=" + log_file,
              "-o",       "dbglevel=warn"};
    return d;
  }
  if (c.driver == "rclone") {
    d.argv = {"rclone",
              "mount",
              ":s3:" + c.bucket + "/" + full_key,
              mountpoint,
              "--allow-other",
              "--uid",
              uid,
              "--gid",
              gid,
              "--umask",
              "022",
              "--s3-provider",
              "Other",
              "--s3-endpoint",
              c.endpoint,
              "--s3-region",
              c.region,
              "--s3-env-auth",
              "--vfs-cache-mode",
              "writes",
              "--log-file",
              log_file,
              "-o",
              "nosuid",
              "-o",
              "nodev"};
    return d;
  }
  // A command template, split on spaces (no shell).
  std::string_view rest = c.driver;
  while (!rest.empty()) {
    const auto space = rest.find(' ');
    std::string word(rest.substr(0, space));
    rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
    if (word.empty()) continue;
    replace_all(word, "{bucket}", c.bucket);
    replace_all(word, "{key}", full_key);
    replace_all(word, "{source}", c.bucket + ":/" + full_key);
    replace_all(word, "{mountpoint}", mountpoint);
    replace_all(word, "{endpoint}", c.endpoint);
    replace_all(word, "{region}", c.region);
    replace_all(word, "{uid}", uid);
    replace_all(word, "{gid}", gid);
    replace_all(word, "{log}", log_file);
    d.argv.push_back(std::move(word));
  }
  if (d.argv.empty()) {
    error = "DOCKGATE_MOUNT_DRIVER is empty";
    return std::nullopt;
  }
  return d;
}

}  // namespace dockgate::mount
