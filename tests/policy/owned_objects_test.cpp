// compose.json's network, volume and attachment reviews, and the filters that keep
// foreign networks, volumes and containers out of answers, one rule at a time.
#include "dockgate/policy/owned_objects.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/ownership.hpp"

using namespace dockgate::policy;

namespace {
const profile& compose() {
  static const policy p = [] {
    std::ifstream in(std::string(DOCKGATE_SOURCE_DIR) + "/compose/policies/compose.json");
    std::stringstream s;
    s << in.rdbuf();
    auto r = parse_policy(s.str());
    REQUIRE(r.value);
    return std::move(*r.value);
  }();
  return p.default_();
}

// The reviewed body, or "DENY: <reason>".
std::string reviewed(operation op, const std::string& body, rewrite* out = nullptr) {
  auto d = review_body(compose(), op, body);
  if (auto* x = std::get_if<deny>(&d)) return "DENY: " + x->reason;
  if (out) *out = std::get<rewrite>(d);
  return std::get<rewrite>(d).body;
}
const std::string image = R"("Image":"dockgate/test-busybox")";
}  // namespace

TEST_CASE("NetworkCreate: compose's body passes with the owner label, host options are refused") {
  CHECK(
      reviewed(
          operation::NetworkCreate,
          R"({"Name": "p_backend", "CheckDuplicate": true, "Labels": {"com.docker.compose.project": "p"}, "Attachable": true})") ==
      R"({"Name":"p_backend","CheckDuplicate":true,"Attachable":true,"Labels":{"com.docker.compose.project":"p","dockgate.owner":"compose"}})");
  rewrite rw;
  CHECK_FALSE(reviewed(operation::NetworkCreate, R"({"Name":"p_front"})", &rw).starts_with("DENY"));
  CHECK(rw.name == "p_front");  // the audit line's object
  CHECK(
      reviewed(
          operation::NetworkCreate,
          R"({"Name":"n","Driver":"bridge","Internal":true,"IPAM":{"Driver":"default","Config":[]}})")
          .find("DENY") == std::string::npos);
  for (const char* body :
       {R"({"Name":"n","Driver":"macvlan"})", R"({"Name":"n","Driver":"overlay"})",
        R"({"Name":"n","Scope":"swarm"})",
        R"({"Name":"n","Options":{"com.docker.network.bridge.name":"eth0"}})",
        R"({"Name":"n","IPAM":{"Config":[{"Subnet":"10.0.0.0/8"}]}})",
        R"({"Name":"n","IPAM":{"Driver":"dhcp"}})", R"({"Name":"n","IPAM":{"Options":{"a":"b"}}})",
        R"({"Name":"n","EnableIPv6":true})", R"({"Name":"n","Ingress":true})",
        R"({"Name":"n","ConfigOnly":true})", R"({"Name":"n","ConfigFrom":{"Network":"other"}})",
        R"({"Name":"n","Labels":{"dockgate.owner":"x"}})", R"({"Name":"a/b"})", R"({"Name":""})",
        R"({"Name":"n","name":"m"})"}) {
    CAPTURE(body);
    CHECK(reviewed(operation::NetworkCreate, body).starts_with("DENY"));
  }
}

TEST_CASE("VolumeCreate: the local driver without options, the name handed to the proxy") {
  rewrite rw;
  CHECK(reviewed(operation::VolumeCreate, R"({"Name":"p_data","Labels":{"a":"b"}})", &rw) ==
        R"({"Name":"p_data","Labels":{"a":"b","dockgate.owner":"compose"}})");
  CHECK(rw.volumes == std::vector<std::string>{"p_data"});
  CHECK(rw.name == "p_data");  // the audit line's object
  CHECK(reviewed(operation::VolumeCreate, R"({})", &rw) ==
        R"({"Labels":{"dockgate.owner":"compose"}})");
  CHECK(rw.volumes.empty());
  for (const char* body :
       {R"({"Name":"v","Driver":"nfs"})",
        R"({"Name":"v","DriverOpts":{"type":"none","o":"bind","device":"/etc"}})",
        R"({"Name":"v","ClusterVolumeSpec":{"Group":"g"}})", R"({"Name":"../v"})",
        R"({"Name":"v","Labels":{"dockgate.workspace":"w"}})"}) {
    CAPTURE(body);
    CHECK(reviewed(operation::VolumeCreate, body).starts_with("DENY"));
  }
}

TEST_CASE(
    "NetworkConnect and NetworkDisconnect: the container goes to the proxy, endpoints by rule") {
  rewrite rw;
  CHECK(reviewed(operation::NetworkConnect,
                 R"({"Container":"abc","EndpointConfig":{"Aliases":["abc","web"]}})",
                 &rw) == R"({"Container":"abc","EndpointConfig":{"Aliases":["abc","web"]}})");
  CHECK(rw.container == "abc");
  CHECK(with_container(rw.body, operation::NetworkConnect, std::string(64, 'f')) ==
        R"({"Container":")" + std::string(64, 'f') +
            R"(","EndpointConfig":{"Aliases":["abc","web"]}})");
  CHECK(reviewed(operation::NetworkDisconnect, R"({"Container":"abc","Force":true})", &rw) ==
        R"({"Container":"abc","Force":true})");
  CHECK(reviewed(operation::NetworkDisconnect, R"({"Force":true})").starts_with("DENY"));
  CHECK(reviewed(operation::NetworkConnect,
                 R"({"Container":"a","EndpointConfig":{"Links":["other:db"]}})")
            .starts_with("DENY"));
  CHECK(reviewed(operation::NetworkConnect,
                 R"({"Container":"a","EndpointConfig":{"DriverOpts":{"a":"b"}}})")
            .starts_with("DENY"));
}

TEST_CASE(
    "ContainerCreate under compose.json: owned networks and volumes are named for the proxy") {
  rewrite rw;
  const std::string body =
      "{" + image +
      R"(,"Volumes":{"/data":{}},"HostConfig":{"NetworkMode":"p_backend","Binds":["p_data:/data:rw"],
      "VolumesFrom":[],"PortBindings":{},"Links":[],"LogConfig":{"Type":"","Config":{}}},
      "NetworkingConfig":{"EndpointsConfig":{"p_backend":{"Aliases":["db"],"IPAMConfig":{}}}}})";
  CHECK_FALSE(reviewed(operation::ContainerCreate, body, &rw).starts_with("DENY"));
  CHECK(rw.networks == std::vector<std::string>{"p_backend"});
  CHECK(rw.volumes == std::vector<std::string>{"p_data"});
  CHECK(rw.bind_sources.empty());
  CHECK(rw.image == "dockgate/test-busybox");  // the audit line's object, as the body names it
  const std::string mount =
      "{" + image +
      R"(,"HostConfig":{"Mounts":[{"Type":"volume","Source":"v1","Target":"/v","VolumeOptions":{"NoCopy":true}},
      {"Type":"volume","Target":"/anonymous"}]}})";
  CHECK_FALSE(reviewed(operation::ContainerCreate, mount, &rw).starts_with("DENY"));
  CHECK(rw.volumes == std::vector<std::string>{"v1"});
  for (
      const char* hostile :
      {R"("HostConfig":{"Binds":["/etc:/host"]})", R"("HostConfig":{"Binds":["v:/x:shared"]})",
       R"("HostConfig":{"Binds":["v:relative"]})",
       R"("HostConfig":{"Mounts":[{"Type":"bind","Source":"/etc","Target":"/x"}]})",
       R"("HostConfig":{"Mounts":[{"Type":"volume","Source":"v","Target":"/x","VolumeOptions":{"DriverConfig":{"Name":"local","Options":{"device":"/etc"}}}}]})",
       R"("HostConfig":{"Mounts":[{"Type":"volume","Source":"v","Target":"/x","VolumeOptions":{"Subpath":"../.."}}]})",
       R"("HostConfig":{"Mounts":[{"Type":"volume","Source":"v","Target":"/x","BindOptions":{"Propagation":"shared"}}]})",
       R"("HostConfig":{"Mounts":[{"Type":"tmpfs","Target":"/x"}]})",
       R"("Volumes":{"relative":{}})", R"("HostConfig":{"NetworkMode":"host"})",
       R"("HostConfig":{"NetworkMode":"container:other"})", R"("HostConfig":{"NetworkMode":"a/b"})",
       R"("NetworkingConfig":{"EndpointsConfig":{"host":{}}})",
       R"("NetworkingConfig":{"EndpointsConfig":{"n":{"Links":["x:y"]}}})",
       R"("NetworkingConfig":{"EndpointsConfig":{"n":{"DriverOpts":{"a":"b"}}}})",
       R"("HostConfig":{"VolumesFrom":["other"]})", R"("HostConfig":{"VolumeDriver":"nfs"})"}) {
    CAPTURE(hostile);
    CHECK(reviewed(operation::ContainerCreate, "{" + image + "," + hostile + "}")
              .starts_with("DENY"));
  }
}

TEST_CASE("network, volume and disk-usage answers keep only what the profile owns") {
  const std::string mine(64, 'a'), theirs(64, 'b');
  const std::string networks =
      R"([{"Name":"bridge","Id":"1","Labels":{},"Containers":{")" + mine +
      R"(":{"Name":"m","IPv4Address":"1"},")" + theirs + R"(":{"Name":"t","IPv4Address":"2"}}},)" +
      R"({"Name":"p_backend","Id":"2","Labels":{"dockgate.owner":"compose"},"Containers":{}},)" +
      R"({"Name":"foreign","Id":"3","Labels":{"x":"y"},"Containers":{}},)" +
      R"({"Name":"bridge2","Id":"4","Labels":{"dockgate.owner":"other"}}])";
  CHECK(networks_list_containers(networks));
  CHECK(
      filter_networks(networks, "compose", {mine}) ==
      R"([{"Name":"bridge","Id":"1","Labels":{},"Containers":{")" + mine +
          R"(":{"Name":"m","IPv4Address":"1"}}},)" +
          R"({"Name":"p_backend","Id":"2","Labels":{"dockgate.owner":"compose"},"Containers":{}}])" +
          "\n");
  // One inspect: the same, and a foreign one is not shown at all.
  CHECK(filter_networks(R"({"Name":"foreign","Labels":{},"Containers":{}})", "compose", {}) ==
        std::nullopt);
  CHECK(filter_networks(R"({"Name":"n","Labels":{"dockgate.owner":"compose"},"Containers":{")" +
                            theirs + R"(":{}}})",
                        "compose", {}) ==
        R"({"Name":"n","Labels":{"dockgate.owner":"compose"},"Containers":{}})"
        "\n");
  CHECK(
      filter_volume_list(
          R"({"Volumes":[{"Name":"a","Labels":{"dockgate.owner":"compose"}},{"Name":"b","Labels":null}],"Warnings":null})",
          "compose") ==
      R"({"Volumes":[{"Name":"a","Labels":{"dockgate.owner":"compose"}}],"Warnings":null})"
      "\n");
  CHECK(
      filter_data_usage(
          R"({"LayersSize":1,"Images":[{"Id":"i"}],"Containers":[{"Names":["/t"],"Labels":{}}],)"
          R"("Volumes":[{"Name":"v","Labels":{"dockgate.owner":"compose"}}],"BuildCache":null})",
          "compose") ==
      R"({"LayersSize":1,"Images":[{"Id":"i"}],"Containers":[],"Volumes":[{"Name":"v","Labels":{"dockgate.owner":"compose"}}],"BuildCache":null})"
      "\n");
  CHECK(parse_network_inspect(R"({"Name":"n","Id":")" + mine +
                              R"(","Labels":{"dockgate.owner":"compose"}})")
            ->owner == "compose");
  CHECK(parse_volume_inspect(R"({"Name":"v","Labels":null})")->owner.empty());
  CHECK(container_ids(R"([{"Id":")" + mine + R"("},{"Id":"short"}])") ==
        std::vector<std::string>{mine});
}

// The ownership table (policy/ownership.hpp) against the route table: every path that
// names a container, an exec, a network or a volume has its lookup, and every list,
// event stream and prune of what a profile owns is confined. A row removed from the table
// fails here, named by its operation.
namespace {
struct route_row {
  std::string_view method;
  std::string_view path;
  operation op;
};
constexpr route_row route_rows[] = {
#define DOCKGATE_ROUTE(method, path, name) {#method, path, operation::name},
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_ROUTE
};
}  // namespace

TEST_CASE(
    "ownership table: every path that names a container, an exec, a network or a volume "
    "has its lookup",
    "[ownership]") {
  std::size_t named = 0;
  for (const auto& route : route_rows) {
    INFO(route.method << " " << route.path << " (" << operation_name(route.op) << ")");
    path_object expected = path_object::none;
    if (route.path.starts_with("/containers/{id}")) expected = path_object::container;
    if (route.path.starts_with("/exec/{id}")) expected = path_object::exec;
    if (route.path.starts_with("/networks/{id}")) expected = path_object::network;
    if (route.path.starts_with("/volumes/{name}")) expected = path_object::volume;
    if (expected != path_object::none) ++named;
    CHECK(operation_ownership(route.op).object == expected);
  }
  CHECK(named == 33);  // the route table's 23 container, 3 exec, 4 network and 3 volume paths
}

TEST_CASE("ownership table: lists, events and prunes of what a profile owns are confined",
          "[ownership]") {
  for (const auto& route : route_rows) {
    INFO(route.method << " " << route.path << " (" << operation_name(route.op) << ")");
    const auto rule = operation_ownership(route.op);
    const bool owned_family = route.path.starts_with("/containers") ||
                              route.path.starts_with("/networks") ||
                              route.path.starts_with("/volumes");
    const bool list = route.method == "get" && route.path.find('{') == std::string_view::npos &&
                      (owned_family || route.path == "/events" || route.path == "/system/df");
    const bool prune = owned_family && route.path.ends_with("/prune");
    // A list answers only with what the profile owns; a prune acts only on it.
    // One network's inspect: its containers are filtered as a list's are.
    const bool network_inspect = route.method == "get" && route.path == "/networks/{id}";
    CHECK((rule.answer != owned_answer::as_is) == (list || network_inspect));
    CHECK((rule.filters != owned_filters::none) ==
          (prune || route.path == "/containers/json" || route.path == "/events"));
    CHECK(rule.predefined_networks_readable == network_inspect);
  }
  CHECK(operation_ownership(operation::SystemEvents) ==
        ownership_rule{path_object::none, owned_filters::container_events_by_owner,
                       owned_answer::events});
  CHECK(operation_ownership(operation::ContainerList) ==
        ownership_rule{path_object::none, owned_filters::by_owner, owned_answer::container_list});
  CHECK(operation_ownership(operation::NetworkList).answer == owned_answer::networks);
  CHECK(operation_ownership(operation::NetworkInspect).answer == owned_answer::networks);
  CHECK(operation_ownership(operation::VolumeList).answer == owned_answer::volume_list);
  CHECK(operation_ownership(operation::SystemDataUsage).answer == owned_answer::data_usage);
}
