// Apache Iceberg's own REST catalog server (RESTCatalogServer from iceberg-open-api's test fixtures, the
// server behind the iceberg-rest-fixture image), bound to 127.0.0.1: the original binds every interface
// and has no option for the host. Everything else is Iceberg's: the backend catalog is built from the
// CATALOG_* environment variables exactly as RESTCatalogServer does (JdbcCatalog by default), and the
// servlet and adapter are its own. Usage: java -cp <jars>:<this class> \
//   org.apache.iceberg.rest.LoopbackRESTCatalogServer <port>
package org.apache.iceberg.rest;

import java.net.InetSocketAddress;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogProperties;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.relocated.com.google.common.collect.Maps;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.handler.gzip.GzipHandler;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class LoopbackRESTCatalogServer {
  public static void main(String[] args) throws Exception {
    if (args.length != 1) {
      throw new IllegalArgumentException("usage: LoopbackRESTCatalogServer <port on 127.0.0.1>");
    }
    Map<String, String> properties = Maps.newHashMap(RCKUtils.environmentCatalogConfig());
    properties.putIfAbsent(CatalogProperties.CATALOG_IMPL, JdbcCatalog.class.getName());
    properties.putIfAbsent(CatalogProperties.URI, "jdbc:sqlite::memory:");
    properties.putIfAbsent("jdbc.schema-version", "V1");
    if (properties.get(CatalogProperties.WAREHOUSE_LOCATION) == null) {
      throw new IllegalArgumentException("set CATALOG_WAREHOUSE (the warehouse location)");
    }
    Catalog backend = CatalogUtil.buildIcebergCatalog("rest_backend", properties, new Configuration());
    RESTCatalogAdapter adapter =
        new RESTServerCatalogAdapter(new RESTCatalogServer.CatalogContext(backend, properties));

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(adapter)), "/*");
    context.insertHandler(new GzipHandler());
    Server server = new Server(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])));
    server.setHandler(context);
    server.start();
    server.join();
  }
}
